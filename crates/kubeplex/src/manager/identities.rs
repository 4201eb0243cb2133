//! Which cluster each of the code's contexts reaches, asked when the manager starts: their writes wait
//! for the answer, so that two contexts for one cluster never both write.

use std::sync::Arc;

use crate::client::{ClientPool, IdentitySource};
use crate::readiness::Readiness;

/// Declares every context of `pool` in the identities (the parents' `primary` contexts first, then the
/// others by name), holding its writes, and asks each which cluster it is, all at once, in the
/// background: a cluster that does not answer holds back only its own writes, and is asked again when
/// it answers its pings.
pub(super) fn ask(
    pool: &ClientPool,
    primary: &[String],
    readiness: &Arc<Readiness>,
    (allow, source): (bool, IdentitySource),
) {
    let identities = readiness.identities();
    identities.allow_duplicates(allow);
    identities.read_from(source);
    let mut contexts: Vec<(&str, _)> = pool.access().collect();
    contexts.sort_by_key(|(name, _)| (!primary.iter().any(|p| p == name), name.to_owned()));
    for (place, (name, access)) in contexts.into_iter().enumerate() {
        identities.declare_context(name, place, access.identity().clone());
        readiness.identifying(name);
        let Ok(client) = pool.client(name) else {
            continue;
        };
        let (name, readiness) = (name.to_owned(), readiness.clone());
        tokio::spawn(async move {
            // A few times, a second apart, while it does not answer (a loaded server at startup); after
            // that its pings ask it.
            for attempt in 0..ASKS_AT_START {
                if attempt > 0 {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                crate::readiness::identify(&name, client.clone(), &readiness).await;
                if !readiness.identities().is_held(&name) {
                    break;
                }
            }
        });
    }
}

/// How many times a context is asked at start before its pings take over.
const ASKS_AT_START: usize = 3;
