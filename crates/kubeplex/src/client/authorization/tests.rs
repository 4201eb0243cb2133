use super::*;

#[tokio::test(start_paused = true)]
async fn the_limit_allows_one_event_per_interval() {
    let mut limit = Limit::new(Duration::from_secs(5), true);
    assert!(!limit.allows(), "the first event was at the start");
    tokio::time::advance(Duration::from_millis(4_999)).await;
    assert!(!limit.allows());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(limit.allows());
    assert!(!limit.allows(), "the one just now counts");
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(limit.allows());

    let mut fresh = Limit::new(Duration::from_secs(5), false);
    assert!(fresh.allows());
    assert!(!fresh.allows());
}

/// What the plugins print when they fail, and what no error may repeat.
const SECRET: &str = "plugin-s3cr3t-51c7";

/// A stand-in API server that accepts only the bearer token in `accepted`: `/version` is answered, any
/// other request with a ConfigMap; each accepted request's method and body are recorded.
async fn server(accepted: Arc<Mutex<String>>) -> (String, Arc<Mutex<Vec<String>>>) {
    use http_body_util::{BodyExt, Full};
    use hyper::body::{Bytes, Incoming};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (recorded, accepted) = (recorded.clone(), accepted.clone());
            let serve = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (recorded, accepted) = (recorded.clone(), accepted.clone());
                async move {
                    let wanted = format!("Bearer {}", accepted.lock());
                    let given = request.headers().get(AUTHORIZATION).cloned();
                    let (method, path) =
                        (request.method().clone(), request.uri().path().to_owned());
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let (status, answer) = if given.is_none_or(|g| g != wanted.as_str()) {
                        let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#;
                        (StatusCode::UNAUTHORIZED, status)
                    } else {
                        let body = String::from_utf8_lossy(&body);
                        recorded.lock().push(format!("{method} {path} {body}"));
                        match path.as_str() {
                            "/version" => (
                                StatusCode::OK,
                                r#"{"major":"1","minor":"37","gitVersion":"v1.37.0"}"#,
                            ),
                            _ => (
                                StatusCode::OK,
                                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"apps"}}"#,
                            ),
                        }
                    };
                    let response = Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(answer)))
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), serve),
            );
        }
    });
    (url, seen)
}

/// An exec plugin in `dir` printing the token in `dir/token`, counting its runs in `dir/runs`; while
/// `dir/fail` exists it prints [`SECRET`] and fails. With `expires`, its token expires that far ahead.
fn plugin(dir: &std::path::Path, expires: Option<Duration>) -> kube::config::AuthInfo {
    use std::os::unix::fs::PermissionsExt as _;
    let d = dir.display();
    let expiry = expires.map_or(String::new(), |after| {
        let at = std::time::SystemTime::now() + after;
        let at = at.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        format!(r#","expirationTimestamp":"$(date -u -d @{at} +%Y-%m-%dT%H:%M:%SZ)""#)
    });
    let script = format!(
        "#!/bin/sh\necho run >> {d}/runs\nif [ -e {d}/fail ]; then echo 'token {SECRET}'; echo '{SECRET}' >&2; exit 3; fi\n\
         echo \"{{\\\"apiVersion\\\":\\\"client.authentication.k8s.io/v1\\\",\\\"kind\\\":\\\"ExecCredential\\\",\
         \\\"status\\\":{{\\\"token\\\":\\\"$(cat {d}/token)\\\"{}}}}}\"\n",
        expiry.replace('"', "\\\"")
    );
    let path = dir.join("plugin");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    serde_json::from_value(serde_json::json!({ "exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": path.to_string_lossy(),
        "interactiveMode": "Never",
        "env": [{ "name": "PLUGIN_ENV", "value": SECRET }],
    }}))
    .unwrap()
}

/// How many times the plugin in `dir` ran.
fn runs(dir: &std::path::Path) -> usize {
    let runs = std::fs::read_to_string(dir.join("runs")).unwrap_or_default();
    runs.lines().count()
}

/// A stand-in server accepting `token`, and a client of it whose user is the plugin in `dir` (handing out
/// `token`), running it again at most every `every`.
async fn exec_client(
    dir: &std::path::Path,
    token: &str,
    expires: Option<Duration>,
    every: Duration,
) -> (kube::Client, Arc<Mutex<String>>, Arc<Mutex<Vec<String>>>) {
    std::fs::write(dir.join("token"), token).unwrap();
    let accepted = Arc::new(Mutex::new(token.to_owned()));
    let (url, seen) = server(accepted.clone()).await;
    let mut config = kube::Config::new(url.parse().unwrap());
    config.auth_info = plugin(dir, expires);
    let timeout = Duration::from_secs(30);
    let access = super::super::Access::renewing_every("member", config, timeout, every)
        .await
        .unwrap();
    assert!(access.authorization.renews());
    let client = super::super::transport::client(&access, &super::super::Fence::default()).unwrap();
    (client, accepted, seen)
}

/// The server now accepts only `token`, and the plugin hands it out.
fn rotate(dir: &std::path::Path, accepted: &Mutex<String>, token: &str) {
    std::fs::write(dir.join("token"), token).unwrap();
    *accepted.lock() = token.to_owned();
}

fn unauthorized(result: Result<impl std::fmt::Debug, kube::Error>) -> kube::Error {
    match result {
        Err(error @ kube::Error::Api(_)) if crate::core::chain(&error).contains("401") => error,
        other => panic!("expected a 401: {other:?}"),
    }
}

#[tokio::test]
async fn a_rejected_exec_token_is_asked_for_again_once_per_burst_and_the_requests_are_sent_again() {
    let dir = tempfile::tempdir().unwrap();
    let (client, accepted, seen) = exec_client(dir.path(), "t1", None, Duration::ZERO).await;
    client.apiserver_version().await.unwrap();

    // Revoked and replaced: a burst of requests, each refused once, makes the plugin run once.
    rotate(dir.path(), &accepted, "t2");
    let before = runs(dir.path());
    let burst = (0..8).map(|_| client.apiserver_version());
    for answer in futures::future::join_all(burst).await {
        answer.unwrap();
    }
    assert_eq!(runs(dir.path()) - before, 1, "one run for the burst");

    // A write is sent again whole.
    rotate(dir.path(), &accepted, "t3");
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(client.clone(), "apps");
    let object = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "web" }, "data": { "value": "v3" },
    }))
    .unwrap();
    api.create(&Default::default(), &object).await.unwrap();
    let seen = seen.lock().clone();
    let write = seen.last().unwrap();
    assert!(
        write.starts_with("POST ") && write.contains(r#""value":"v3""#),
        "{seen:?}"
    );

    // A token the plugin cannot replace: the 401 is the answer, without the plugin's output.
    rotate(dir.path(), &accepted, "t4");
    std::fs::write(dir.path().join("fail"), "").unwrap();
    let error = unauthorized(client.apiserver_version().await);
    assert!(!format!("{error:?}").contains(SECRET), "{error:?}");
}

#[tokio::test]
async fn a_rejected_exec_token_is_not_asked_for_again_within_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let hour = Duration::from_secs(3600);
    let (client, accepted, _) = exec_client(dir.path(), "t1", None, hour).await;
    rotate(dir.path(), &accepted, "t2");
    let before = runs(dir.path());
    unauthorized(client.apiserver_version().await);
    unauthorized(client.apiserver_version().await);
    assert_eq!(runs(dir.path()), before, "the plugin ran within the limit");
}

#[tokio::test]
async fn an_expiring_token_that_cannot_be_renewed_fails_without_the_plugins_output() {
    let dir = tempfile::tempdir().unwrap();
    // Within kube's minute of wiggle room: every request asks the plugin again.
    let soon = Some(Duration::from_secs(30));
    let (client, accepted, _) = exec_client(dir.path(), "t1", soon, Duration::ZERO).await;
    client.apiserver_version().await.unwrap();
    rotate(dir.path(), &accepted, "t2");
    let before = runs(dir.path());
    client.apiserver_version().await.unwrap();
    assert!(runs(dir.path()) > before, "the expiring token was renewed");

    std::fs::write(dir.path().join("fail"), "").unwrap();
    let error = client.apiserver_version().await.unwrap_err();
    let text = crate::core::chain(&error);
    assert!(text.contains("exit status: 3"), "{text}");
    for shown in [text, error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains(SECRET), "{shown}");
    }
}
