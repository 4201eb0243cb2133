//! The `Authorization` of a cluster's requests, shared by every client of the cluster (the controllers',
//! the pings', the leases'), and asked for again when it expires or the server rejects it.
//!
//! kube's own authentication is kept underneath for what kube reads itself: a token, a token file (again
//! every minute), an auth provider. An exec plugin's token is kubeplex's ([`CredentialPlugin`]): given to
//! kube as a static token, and asked for again the way client-go does — a minute before its
//! `expirationTimestamp` (the requests meanwhile wait for that one run), and when the server rejects it (a
//! token without an expiry, or one revoked or rotated before it): a 401 to a request whose token came from
//! the plugin runs the plugin again — once per burst of 401s (the requests that got one meanwhile take the
//! new token), at most every [`RENEW_AT_MOST_EVERY`] — and the request is sent once more. Every request
//! kube sends has its body in memory (a watch's is empty, and its 401 comes before its stream), so each one
//! can be sent again.
//!
//! A plugin's output and environment never reach a log or an error ([`PluginError`] holds neither).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::http::header::AUTHORIZATION;
use hyper::http::{HeaderValue, Request, Response, StatusCode};
use kube::client::middleware::AuthLayer;
use kube::client::{Body, ConfigExt};
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceExt};

#[cfg(doc)]
use super::credential_plugin::PluginError;
use super::credential_plugin::{Credential, CredentialPlugin};
use super::no_access::NoAccess;
use crate::core::chain;

/// How often, at most, a rejected token makes its exec plugin run again: a plugin that keeps handing out
/// a token the server refuses is not run for every request.
pub(crate) const RENEW_AT_MOST_EVERY: Duration = Duration::from_secs(5);

/// kube's authentication of a request, turned into the header it sets (`None`: it sets none).
type Source = BoxCloneSyncService<Request<Body>, Response<Option<HeaderValue>>, BoxError>;

/// The credentials of a request could not be had (an exec plugin that failed, a token file gone).
#[derive(Debug, thiserror::Error)]
#[error("the request's credentials could not be obtained: {0}")]
pub(crate) struct NoCredentials(String);

/// How one cluster's requests are authorized.
pub(crate) struct Authorization {
    /// The cluster, as logs name it.
    context: String,
    current: Mutex<Current>,
    /// With an exec plugin's token: how the plugin is run again.
    renewal: Option<Renewal>,
}

/// The authentication in use, and how many times it was renewed.
struct Current {
    source: Source,
    generation: u64,
    /// When the plugin's token is to be asked for again before it expires.
    renew_at: Option<Instant>,
    /// How many renewals ran (whether or not they succeeded).
    runs: u64,
}

/// An exec plugin's token, asked for again when it expires or is rejected.
struct Renewal {
    plugin: CredentialPlugin,
    /// The configuration the plugin's tokens are given to kube in (only its user counts).
    config: kube::Config,
    /// Held while the plugin runs: one run per burst of 401s, or of requests finding the token expiring.
    state: tokio::sync::Mutex<RenewalState>,
}

/// What the renewals remember.
struct RenewalState {
    limit: Limit,
    /// The last failure of the plugin, logged once until it changes.
    failed: Option<String>,
}

/// At most one event per `every`, counted on tokio's clock.
pub(crate) struct Limit {
    every: Duration,
    last: Option<Instant>,
}

impl Limit {
    /// A limit whose first event is now when `now`, else still to come.
    pub(crate) fn new(every: Duration, now: bool) -> Self {
        Self {
            every,
            last: now.then(Instant::now),
        }
    }

    /// Whether an event may happen now; if so, it is counted.
    pub(crate) fn allows(&mut self) -> bool {
        let now = Instant::now();
        if let Some(last) = self.last
            && now.saturating_duration_since(last) < self.every
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}

impl Authorization {
    /// The authorization `config` gives the requests of the cluster `context`, or why it has none. `config`
    /// holds no plugin any more: `plugin` gave its `credential`, and a token it gave is asked for again a
    /// minute before it expires and on a 401, at most every `renew_every`.
    pub(crate) fn of(
        context: &str,
        config: &kube::Config,
        plugin: Option<(CredentialPlugin, &Credential)>,
        renew_every: Duration,
    ) -> Result<Self, NoAccess> {
        let layer = config.auth_layer().map_err(|e| NoAccess::of(&e))?;
        let mut renew_at = None;
        // A plugin that gave a client certificate alone authenticates on the TLS connection, not here.
        let renewal =
            plugin
                .filter(|(_, credential)| credential.has_token())
                .map(|(plugin, credential)| {
                    renew_at = credential.renew_at;
                    let mut only_user = kube::Config::new(config.cluster_url.clone());
                    only_user.auth_info = config.auth_info.clone();
                    let state = RenewalState {
                        limit: Limit::new(renew_every, true),
                        failed: None,
                    };
                    Renewal {
                        plugin,
                        config: only_user,
                        state: tokio::sync::Mutex::new(state),
                    }
                });
        Ok(Self {
            context: context.to_owned(),
            current: Mutex::new(Current {
                source: source(layer),
                generation: 0,
                renew_at,
                runs: 0,
            }),
            renewal,
        })
    }

    /// Whether a rejected request is sent again with a renewed token.
    pub(crate) fn renews(&self) -> bool {
        self.renewal.is_some()
    }

    /// The header for the next request, and the generation it belongs to; a token about to expire is
    /// asked for again first.
    async fn header(&self) -> Result<(Option<HeaderValue>, u64), BoxError> {
        let (mut source, mut generation, runs, due) = self.now();
        if due {
            self.renew_expiring(runs).await.map_err(NoCredentials)?;
            (source, generation, _, _) = self.now();
        }
        match source.oneshot(Request::new(Body::empty())).await {
            Ok(header) => Ok((header.into_body(), generation)),
            // kube reading a token file or an auth provider: its error could quote what it read.
            Err(error) => {
                let error: &(dyn std::error::Error + 'static) = error.as_ref();
                Err(NoCredentials(chain(error)).into())
            }
        }
    }

    /// The authentication in use, its generation, how many renewals ran, and whether it is to be renewed.
    fn now(&self) -> (Source, u64, u64, bool) {
        let current = self.current.lock();
        let due = self.renewal.is_some() && current.renew_at.is_some_and(|at| Instant::now() >= at);
        (
            current.source.clone(),
            current.generation,
            current.runs,
            due,
        )
    }

    /// Asks the plugin for a token about to expire, unless a run ended since `runs` were counted: then
    /// that run's outcome is this request's too.
    async fn renew_expiring(&self, runs: u64) -> Result<(), String> {
        let Some(renewal) = self.renewal.as_ref() else {
            return Ok(());
        };
        let mut state = renewal.state.lock().await;
        if self.current.lock().runs != runs {
            return match &state.failed {
                Some(problem) => Err(problem.clone()),
                None => Ok(()),
            };
        }
        self.run(renewal, &mut state).await
    }

    /// A header to send a request rejected with the header of `seen` again: another request's renewal
    /// since then, else the plugin's new token. `None` when the plugin may not run yet or failed.
    async fn renew(&self, seen: u64) -> Option<HeaderValue> {
        let renewal = self.renewal.as_ref()?;
        let mut state = renewal.state.lock().await;
        if self.current.lock().generation == seen {
            if !state.limit.allows() {
                return None;
            }
            self.run(renewal, &mut state).await.ok()?;
        }
        drop(state);
        self.header().await.ok().and_then(|(header, _)| header)
    }

    /// Runs the plugin and takes its token; a failure is logged when it changes.
    async fn run(&self, renewal: &Renewal, state: &mut RenewalState) -> Result<(), String> {
        let context = &self.context;
        let ran = match renewal.plugin.run().await {
            Ok(credential) if credential.has_token() => {
                let mut config = renewal.config.clone();
                config.auth_info = credential.given_to(&config.auth_info);
                config
                    .auth_layer()
                    .map(|layer| (layer, credential.renew_at))
                    .map_err(|e| chain(&e))
            }
            Ok(_) => Err("the credential plugin gave no token this time".to_owned()),
            Err(error) => Err(error.to_string()),
        };
        let mut current = self.current.lock();
        current.runs = current.runs.saturating_add(1);
        match ran {
            Ok((layer, renew_at)) => {
                tracing::debug!(cluster = %context, "the credential plugin ran again");
                current.source = source(layer);
                current.generation = current.generation.saturating_add(1);
                current.renew_at = renew_at;
                state.failed = None;
                Ok(())
            }
            Err(problem) => {
                if state.failed.as_ref() != Some(&problem) {
                    tracing::warn!(cluster = %context, %problem, "the credential plugin could not renew the credentials");
                }
                state.failed = Some(problem.clone());
                Err(problem)
            }
        }
    }

    /// Sends `request` through `inner` with this authorization; rejected, once more with a renewed token.
    async fn send<S, B>(
        self: Arc<Self>,
        mut request: Request<Body>,
        inner: S,
    ) -> Result<Response<B>, BoxError>
    where
        S: Service<Request<Body>, Response = Response<B>> + Clone,
        S::Error: Into<BoxError>,
    {
        let (header, generation) = self.header().await?;
        let again = self.renews().then(|| copy(&request)).flatten();
        set(&mut request, header);
        let response = inner.clone().oneshot(request).await.map_err(Into::into)?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let Some(mut again) = again else {
            return Ok(response);
        };
        let Some(header) = self.renew(generation).await else {
            return Ok(response);
        };
        set(&mut again, Some(header));
        inner.oneshot(again).await.map_err(Into::into)
    }
}

/// kube's authentication layer as the header it sets.
fn source(layer: Option<AuthLayer>) -> Source {
    match layer {
        Some(layer) => BoxCloneSyncService::new(layer.layer(Capture)),
        None => BoxCloneSyncService::new(Capture),
    }
}

/// Answers a request with the `Authorization` header it carries.
#[derive(Clone, Copy)]
struct Capture;

impl Service<Request<Body>> for Capture {
    type Response = Response<Option<HeaderValue>>;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Self::Response, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let header = request.headers().get(AUTHORIZATION).cloned();
        std::future::ready(Ok(Response::new(header)))
    }
}

/// `request` again, if its body is in memory.
fn copy(request: &Request<Body>) -> Option<Request<Body>> {
    let body = request.body().try_clone()?;
    let mut copy = Request::new(body);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    Some(copy)
}

fn set(request: &mut Request<Body>, header: Option<HeaderValue>) {
    match header {
        Some(header) => request.headers_mut().insert(AUTHORIZATION, header),
        None => request.headers_mut().remove(AUTHORIZATION),
    };
}

/// In place of kube's authentication layer: every request authorized by `Authorization`.
#[derive(Clone)]
pub(crate) struct AuthorizeLayer(pub(crate) Arc<Authorization>);

impl<S> Layer<S> for AuthorizeLayer {
    type Service = Authorize<S>;

    fn layer(&self, inner: S) -> Authorize<S> {
        Authorize {
            inner,
            authorization: self.0.clone(),
        }
    }
}

/// A service whose requests are authorized by an [`Authorization`].
#[derive(Clone)]
pub(crate) struct Authorize<S> {
    inner: S,
    authorization: Arc<Authorization>,
}

impl<S, B> Service<Request<Body>> for Authorize<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Response<B>, BoxError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        // Each send makes its own clone ready (the routes below are always ready).
        let inner = self.inner.clone();
        Box::pin(self.authorization.clone().send(request, inner))
    }
}

#[cfg(test)]
mod tests;
