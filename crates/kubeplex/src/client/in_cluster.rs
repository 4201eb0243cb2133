//! The in-cluster context: the Pod's service account and the API server's service address.

use std::ffi::OsString;
use std::path::PathBuf;

/// The kubeconfig context name meaning "the in-cluster service account" in aliases and the environment.
pub const IN_CLUSTER: &str = "in-cluster";

/// Environment variable naming the directory the in-cluster context reads the service account's `token`,
/// `ca.crt` and `namespace` from, instead of [`SERVICE_ACCOUNT_DIR`]; the API server is still
/// `KUBERNETES_SERVICE_HOST`:`KUBERNETES_SERVICE_PORT`. Tests use it to run the in-cluster path against a
/// cluster of their own; a Pod needs neither.
pub const SERVICE_ACCOUNT_DIR_ENV: &str = "KUBEPLEX_SERVICE_ACCOUNT_DIR";

/// Where Kubernetes mounts a Pod's service-account token, CA certificate and namespace.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The in-cluster configuration, as kube's `Config::incluster` builds it (the token file re-read as it
/// rotates, the CA file watched), from the directory [`SERVICE_ACCOUNT_DIR_ENV`] names, else the Pod's
/// mount. `env` reads the environment; each error names the variable or file.
pub(super) async fn config(
    env: impl Fn(&str) -> Option<OsString>,
) -> std::result::Result<kube::Config, String> {
    let var = |name: &str| {
        env(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{name} is not set (is this process running in a Pod?)"))?
            .into_string()
            .map_err(|_| format!("{name} is not valid UTF-8"))
    };
    let host = var("KUBERNETES_SERVICE_HOST")?;
    let port: u16 = var("KUBERNETES_SERVICE_PORT")?
        .parse()
        .map_err(|e| format!("KUBERNETES_SERVICE_PORT: {e}"))?;
    // An IPv6 address is bracketed in a URL.
    let server = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => format!("https://{}", std::net::SocketAddr::new(ip, port)),
        Err(_) => format!("https://{host}:{port}"),
    };

    let dir = env(SERVICE_ACCOUNT_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(SERVICE_ACCOUNT_DIR), PathBuf::from);
    let file = |name: &str| -> std::result::Result<(PathBuf, String), String> {
        let path = dir.join(name);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        Ok((path, text))
    };
    let (ca, pem) = file("ca.crt")?;
    let (token, _) = file("token")?;
    let (_, namespace) = file("namespace")?;
    let path_str = |path: &PathBuf| {
        path.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{} is not valid UTF-8", path.display()))
    };
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let certificates = CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", ca.display()))?;
    if certificates.is_empty() {
        return Err(format!("{}: no certificate", ca.display()));
    }
    // Built as kube's `Config::incluster` builds it, not through the kubeconfig loader: no proxy from the
    // environment (`HTTPS_PROXY`) is taken for the cluster's own service address. kube reads the token
    // again as it rotates, and watches the CA file.
    let mut config = kube::Config::new(server.parse().map_err(|e| format!("{server}: {e}"))?);
    config.default_namespace = namespace.trim().to_owned();
    config.root_cert = Some(certificates);
    config.root_cert_file = Some(ca);
    config.auth_info.token_file = Some(path_str(&token)?);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_in_cluster_configuration_reads_the_directory_the_environment_names() {
        let dir = tempfile::tempdir().unwrap();
        let vars = |port: &'static str| {
            let dir = dir.path().as_os_str().to_owned();
            move |var: &str| match var {
                SERVICE_ACCOUNT_DIR_ENV => Some(dir.clone()),
                "KUBERNETES_SERVICE_HOST" => Some("10.0.0.1".into()),
                "KUBERNETES_SERVICE_PORT" => Some(port.into()),
                _ => None,
            }
        };
        let missing = config(vars("6443")).await.unwrap_err();
        let ca = dir.path().join("ca.crt");
        assert!(
            missing.starts_with(&format!("reading {}: ", ca.display())),
            "{missing}"
        );
        // kube decodes the PEM here; whether it holds a valid certificate is the TLS handshake's business.
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("token"), "secret-token").unwrap();
        std::fs::write(dir.path().join("namespace"), "kubeplex-system\n").unwrap();

        let built = config(vars("6443")).await.unwrap();
        assert_eq!(built.cluster_url.to_string(), "https://10.0.0.1:6443/");
        assert_eq!(built.default_namespace, "kubeplex-system");
        assert_eq!(built.root_cert_file.as_deref(), Some(ca.as_path()));
        assert_eq!(built.root_cert.map(|c| c.len()), Some(1));
        assert_eq!(
            built.auth_info.token_file.as_deref(),
            dir.path().join("token").to_str(),
            "the token is read from its file (and re-read as it rotates), not copied"
        );

        let bad_port = config(vars("https")).await.unwrap_err();
        assert!(
            bad_port.starts_with("KUBERNETES_SERVICE_PORT: "),
            "{bad_port}"
        );
        let no_host = config(|_| None).await.unwrap_err();
        assert_eq!(
            no_host,
            "KUBERNETES_SERVICE_HOST is not set (is this process running in a Pod?)"
        );
        let ipv6 = |var: &str| match var {
            "KUBERNETES_SERVICE_HOST" => Some("fd00::1".into()),
            "KUBERNETES_SERVICE_PORT" => Some("443".into()),
            other => vars("443")(other),
        };
        let built = config(ipv6).await.unwrap();
        assert_eq!(built.cluster_url.to_string(), "https://[fd00::1]:443/");
    }

    /// The proxy the environment of the test below names.
    const PROXY: &str = "http://proxy-user:pr0xy-s3cret@proxy.example:3128";

    #[tokio::test]
    #[ignore = "run by the_in_cluster_configuration_takes_no_proxy_from_the_environment, in a process of its own"]
    async fn the_in_cluster_configuration_in_an_environment_naming_a_proxy() {
        assert_eq!(std::env::var("HTTPS_PROXY").as_deref(), Ok(PROXY));
        let dir = tempfile::tempdir().unwrap();
        let pem = rcgen::generate_simple_self_signed(vec!["kubernetes".to_owned()])
            .unwrap()
            .cert
            .pem();
        std::fs::write(dir.path().join("ca.crt"), pem).unwrap();
        std::fs::write(dir.path().join("token"), "secret-token").unwrap();
        std::fs::write(dir.path().join("namespace"), "kubeplex-system").unwrap();
        let vars = |var: &str| match var {
            SERVICE_ACCOUNT_DIR_ENV => Some(dir.path().as_os_str().to_owned()),
            "KUBERNETES_SERVICE_HOST" => Some("10.0.0.1".into()),
            "KUBERNETES_SERVICE_PORT" => Some("443".into()),
            _ => None,
        };
        let built = config(vars).await.unwrap();
        assert_eq!(built.proxy_url, None);
    }

    #[test]
    fn the_in_cluster_configuration_takes_no_proxy_from_the_environment() {
        // The environment is the process's: the check runs in a process of its own, which sets it.
        let test = "client::in_cluster::tests::the_in_cluster_configuration_in_an_environment_naming_a_proxy";
        let ran = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--ignored", "--test-threads=1"])
            .env("HTTPS_PROXY", PROXY)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&ran.stdout);
        assert!(
            ran.status.success() && stdout.contains("1 passed"),
            "{stdout}{}",
            String::from_utf8_lossy(&ran.stderr)
        );
    }
}
