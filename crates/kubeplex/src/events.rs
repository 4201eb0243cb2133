//! Kubernetes Events on parents, published in the parent's own cluster.
//!
//! One kube `Recorder` per context (a recorder belongs to one client), so that repeats of an event become
//! one series instead of many events.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::error::chain;

/// What an event says.
pub(crate) struct Note<'a> {
    pub(crate) warning: bool,
    /// `PascalCase`, e.g. `ChildConflict`.
    pub(crate) reason: &'a str,
    /// What the controller was doing, e.g. `Apply`.
    pub(crate) action: &'a str,
    pub(crate) message: &'a str,
}

/// Publishes a controller's events, one recorder per context.
pub(crate) struct EventPublisher {
    controller: String,
    recorders: Mutex<HashMap<String, Recorder>>,
}

/// The longest note the API server accepts.
const MAX_NOTE: usize = 1024;

impl EventPublisher {
    pub(crate) fn new(controller: &str) -> Self {
        Self {
            controller: controller.to_owned(),
            recorders: Mutex::default(),
        }
    }

    /// Publishes `note` about `object` in `context`; a failure to publish is logged, never an error.
    pub(crate) async fn publish(
        &self,
        context: &str,
        client: Client,
        object: &ObjectReference,
        note: Note<'_>,
    ) {
        let recorder = {
            let mut recorders = self.recorders.lock().unwrap_or_else(|e| e.into_inner());
            recorders
                .entry(context.to_owned())
                .or_insert_with(|| {
                    let reporter = Reporter {
                        controller: self.controller.clone(),
                        instance: None,
                    };
                    Recorder::new(client, reporter)
                })
                .clone()
        };
        let event = Event {
            type_: if note.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: note.reason.into(),
            note: Some(note.message.chars().take(MAX_NOTE).collect()),
            action: note.action.into(),
            secondary: None,
        };
        if let Err(error) = recorder.publish(&event, object).await {
            tracing::warn!(%context, reason = note.reason, error = %chain(&error), "publishing an event failed");
        }
    }
}
