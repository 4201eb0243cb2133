//! A plain HTTP/1.1 GET with a time limit, as a test sends it to an operator's probe and metrics ports.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, ToSocketAddrs};

use crate::error::{Error, Result};

/// How long one GET may take, connecting included: a server that stops answering fails the request
/// instead of holding the test.
pub const HTTP_LIMIT: Duration = Duration::from_secs(10);

/// A whole HTTP response.
#[derive(Clone, Debug)]
pub struct HttpResponse {
    /// The status code.
    pub code: u16,
    /// The status line and the headers.
    pub head: String,
    /// The body.
    pub body: String,
}

/// GETs `path` on `address` with `Connection: close`, so that the response ends with the connection;
/// [`Error::Http`] when no whole response came within [`HTTP_LIMIT`].
pub async fn http_get(address: impl ToSocketAddrs, path: &str) -> Result<HttpResponse> {
    crate::deadline::arm_test_deadline();
    let failed = |problem: String| Error::Http {
        path: path.to_owned(),
        problem,
    };
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
        Ok(Err(error)) => return Err(failed(error.to_string())),
        Err(_) => return Err(failed(format!("no whole answer within {HTTP_LIMIT:?}"))),
    };
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        return Err(failed(format!("not an HTTP response: {response}")));
    };
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok());
    let code = code.ok_or_else(|| failed(format!("no status code in {head}")))?;
    Ok(HttpResponse {
        code,
        head: head.to_owned(),
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Serves `answer` to one connection, after reading the request's head.
    async fn serve_once(answer: &'static str) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0; 1];
                if stream.read(&mut byte).await.unwrap() == 0 {
                    return;
                }
                head.push(byte[0]);
            }
            stream.write_all(answer.as_bytes()).await.unwrap();
        });
        address
    }

    #[tokio::test]
    async fn a_response_is_split_into_code_head_and_body() {
        let address =
            serve_once("HTTP/1.1 503 Service Unavailable\r\nX-A: b\r\n\r\nnot ready").await;
        let response = http_get(address, "/readyz").await.unwrap();
        assert_eq!(response.code, 503);
        assert_eq!(response.head, "HTTP/1.1 503 Service Unavailable\r\nX-A: b");
        assert_eq!(response.body, "not ready");
    }

    #[tokio::test]
    async fn what_is_not_a_response_is_an_error_naming_the_path() {
        let address = serve_once("garbage").await;
        let error = http_get(address, "/livez").await.unwrap_err().to_string();
        assert!(
            error.starts_with("GET /livez: not an HTTP response"),
            "{error}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_never_answers_fails_the_get_at_the_limit() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let error = http_get(address, "/metrics").await.unwrap_err().to_string();
        assert!(error.contains("no whole answer within 10s"), "{error}");
        drop(listener);
    }
}
