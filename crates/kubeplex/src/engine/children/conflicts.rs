//! Children whose parent reference conflicts — their labels and annotations name different parents, or a
//! UID a live parent has under another name: reported once each, never acted on.

use std::collections::HashSet;

use kube::api::ObjectMeta;
use parking_lot::Mutex;

use crate::core::namespaced_name;

/// How many conflicting objects are remembered as reported. Past it the memory starts over (each is then
/// reported once more), so that a flood of forged objects cannot grow it without bound.
const REMEMBERED: usize = 4096;

/// The longest `why` a report logs: it quotes labels and annotations, which anyone who can write an object
/// of a child kind chooses.
const WHY_LIMIT: usize = 512;

/// The conflicting children reported so far, by cluster and UID.
#[derive(Default)]
pub(crate) struct Conflicts(Mutex<HashSet<(String, String)>>);

impl Conflicts {
    /// Reports `child` (of `kind`, in `context`), whose parent reference conflicts as `why` says: a warning
    /// the first time this object is seen so, nothing after. `true` on that first time, when the caller may
    /// tell the real parent too.
    pub(crate) fn report(&self, context: &str, kind: &str, child: &ObjectMeta, why: &str) -> bool {
        let name = child.name.as_deref().unwrap_or_default();
        let name = namespaced_name(child.namespace.as_deref(), name);
        let object = child
            .uid
            .clone()
            .unwrap_or_else(|| format!("{kind} {name}"));
        {
            let key = (context.to_owned(), object);
            let mut seen = self.0.lock();
            if seen.len() >= REMEMBERED && !seen.contains(&key) {
                seen.clear();
            }
            if !seen.insert(key) {
                return false;
            }
        }
        let why = capped(why);
        tracing::warn!(cluster = %context, %kind, %name, conflict = %why, "a child's parent reference conflicts: left alone");
        true
    }
}

/// `why`, cut to [`WHY_LIMIT`] bytes (on a character boundary).
pub(crate) fn capped(why: &str) -> &str {
    let mut end = why.len().min(WHY_LIMIT);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    &why[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_object_is_reported_once_and_the_memory_stays_bounded() {
        let conflicts = Conflicts::default();
        let child = |uid: String| ObjectMeta {
            name: Some("forged".into()),
            namespace: Some("ns".into()),
            uid: Some(uid),
            ..ObjectMeta::default()
        };
        assert!(conflicts.report("a", "Deployment", &child("u".into()), "why"));
        assert!(!conflicts.report("a", "Deployment", &child("u".into()), "why"));
        assert!(conflicts.report("b", "Deployment", &child("u".into()), "why"));
        for n in 0..REMEMBERED * 2 {
            conflicts.report("a", "Deployment", &child(format!("u{n}")), "why");
        }
        assert!(conflicts.0.lock().len() <= REMEMBERED);
        assert_eq!(capped(&"é".repeat(WHY_LIMIT)).len(), WHY_LIMIT);
    }
}
