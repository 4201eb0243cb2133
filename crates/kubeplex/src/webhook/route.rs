//! An admission handler, erased, and the path it is served at.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;

use super::outcome::Outcome;
use crate::runtime::Runtime;

/// An admission handler, erased: a request for any object in, an [`Outcome`] out.
type Handle = Arc<
    dyn Fn(AdmissionRequest<DynamicObject>, Arc<Runtime>) -> BoxFuture<'static, Outcome>
        + Send
        + Sync,
>;

/// An admission handler and the path it is served at.
#[derive(Clone)]
pub(crate) struct Route {
    pub(crate) path: String,
    pub(super) handle: Handle,
}

impl Route {
    pub(super) fn new(
        path: String,
        handle: impl Fn(AdmissionRequest<DynamicObject>, Arc<Runtime>) -> BoxFuture<'static, Outcome>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            path,
            handle: Arc::new(handle),
        }
    }
}
