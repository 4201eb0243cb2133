//! A tracing layer that records every span and event a reconcile makes, with the spans each is within.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A span as the layer saw it: its name, fields, and the spans it is within (nearest first).
#[derive(Clone, Debug)]
pub(super) struct SpanSeen {
    pub(super) seq: u64,
    pub(super) name: &'static str,
    pub(super) fields: BTreeMap<String, String>,
    pub(super) within: Vec<u64>,
}

/// A log event: its message and the spans it was within (nearest first).
#[derive(Clone, Debug)]
pub(super) struct EventSeen {
    pub(super) target: &'static str,
    pub(super) message: String,
    pub(super) within: Vec<u64>,
}

/// Records every span (when it closes) and every event.
#[derive(Clone, Default)]
pub(super) struct Recording {
    pub(super) next: Arc<AtomicU64>,
    pub(super) spans: Arc<Mutex<Vec<SpanSeen>>>,
    pub(super) events: Arc<Mutex<Vec<EventSeen>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recording {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).expect("a new span is registered");
        let within = span.parent().map_or_else(Vec::new, |parent| {
            let extensions = parent.extensions();
            let seen = extensions.get::<SpanSeen>().expect("recorded");
            std::iter::once(seen.seq)
                .chain(seen.within.iter().copied())
                .collect()
        });
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        span.extensions_mut().insert(SpanSeen {
            seq: self.next.fetch_add(1, Ordering::Relaxed),
            name: attrs.metadata().name(),
            fields,
            within,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(seen) = span.extensions_mut().get_mut::<SpanSeen>()
        {
            values.record(&mut Fields(&mut seen.fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let within = ctx.event_scope(event).map_or_else(Vec::new, |scope| {
            scope
                .filter_map(|span| span.extensions().get::<SpanSeen>().map(|s| s.seq))
                .collect()
        });
        let message = fields.remove("message").unwrap_or_default();
        self.events.lock().push(EventSeen {
            target: event.metadata().target(),
            message,
            within,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id)
            && let Some(seen) = span.extensions().get::<SpanSeen>()
        {
            self.spans.lock().push(seen.clone());
        }
    }
}
