//! A plain HTTP/1.1 GET, as the tests send it to the operator's probe and metrics ports.
#![allow(dead_code)] // Each test binary uses a different part.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, ToSocketAddrs};

/// How long one request may take, connection included: a server that stops answering fails the request
/// instead of hanging the test.
pub const HTTP_LIMIT: Duration = Duration::from_secs(10);

/// A whole response.
pub struct Response {
    pub code: u16,
    /// The status line and the headers.
    pub head: String,
    pub body: String,
}

/// GETs `path` on `address` (`Connection: close`, so the response ends with the connection); the
/// response, or why none came whole within [`HTTP_LIMIT`].
pub async fn http_get(address: impl ToSocketAddrs, path: &str) -> Result<Response, String> {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await?;
        std::io::Result::Ok(response)
    };
    let response = match tokio::time::timeout(HTTP_LIMIT, exchange).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Err(format!("GET {path}: {error}")),
        Err(_) => return Err(format!("GET {path}: no whole answer within {HTTP_LIMIT:?}")),
    };
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        return Err(format!("GET {path}: not an HTTP response: {response}"));
    };
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    let code = code.ok_or_else(|| format!("GET {path}: no status code in {head}"))?;
    let (head, body) = (head.to_owned(), body.to_owned());
    Ok(Response { code, head, body })
}
