//! An API server's own `/metrics` text, where the bench counts the requests it answered.

/// `GET /metrics` of the API server `client` talks to.
pub(crate) async fn server_metrics(client: &kube::Client) -> Result<String, String> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(request)
        .await
        .map_err(|e| format!("reading /metrics: {e}"))
}
