//! The reconcile's own status fields, written in the same server-side apply as kubeplex's part.

use serde::Serialize;

use super::{Cx, OwnStatus};
use crate::core::{Context, Error, Result};

/// The status fields kubeplex writes itself: a reconcile's own fields may not take their names.
const KUBEPLEX_FIELDS: [&str; 2] = ["clusters", "conditions"];

impl<C: Context> Cx<C> {
    /// Sets the parent's own status fields — `fields` serializes to an object, e.g. a struct of your
    /// status' fields other than kubeplex's — to be written after the reconcile with kubeplex's part
    /// (`clusters`, `conditions`) in one server-side apply, by the controller as field manager: a reader
    /// never sees one without the other. Nothing is written when neither part changed, and a cache that
    /// trails the last write is not taken for a change. Each reconcile sets them anew: a field it leaves
    /// out is removed at the next write. Called again, the last call wins.
    ///
    /// A value that is not an object, or that names `clusters` or `conditions`, is
    /// [`Error::InvalidStatus`] (write conditions of your own with a field manager of your own).
    pub fn set_status(&self, fields: impl Serialize) -> Result<()> {
        let invalid = |reason: String| Error::InvalidStatus { reason };
        let value = serde_json::to_value(fields).map_err(|e| invalid(e.to_string()))?;
        let serde_json::Value::Object(fields) = value else {
            return Err(invalid(format!(
                "the fields must serialize to an object, not {value}"
            )));
        };
        if let Some(taken) = KUBEPLEX_FIELDS.iter().find(|f| fields.contains_key(**f)) {
            return Err(invalid(format!(
                "`{taken}` is kubeplex's own field; name yours otherwise"
            )));
        }
        *self.own_status.lock() = Some(fields);
        Ok(())
    }

    /// The fields set by [`set_status`](Self::set_status), taken once the reconcile returned.
    pub(crate) fn take_own_status(&self) -> Option<OwnStatus> {
        self.own_status.lock().take()
    }
}

#[cfg(test)]
mod tests {
    use crate::controller::test_controller::CONTROL;
    use crate::controller::test_controller::cx;

    #[tokio::test]
    async fn own_status_fields_are_an_object_that_leaves_kubeplexs_fields_alone() {
        let cx = cx(CONTROL, 0);
        let refused = |value: serde_json::Value| cx.set_status(value).unwrap_err().to_string();
        assert_eq!(
            refused(serde_json::json!(["placed"])),
            r#"the reconcile's status fields: the fields must serialize to an object, not ["placed"]"#
        );
        assert_eq!(
            refused(serde_json::json!({ "conditions": [] })),
            "the reconcile's status fields: `conditions` is kubeplex's own field; name yours otherwise"
        );
        assert_eq!(cx.take_own_status(), None);
        cx.set_status(serde_json::json!({ "placed": ["a"] }))
            .unwrap();
        cx.set_status(serde_json::json!({ "placed": ["b"] }))
            .unwrap();
        let own = cx.take_own_status().unwrap();
        assert_eq!(
            own["placed"],
            serde_json::json!(["b"]),
            "the last call wins"
        );
    }
}
