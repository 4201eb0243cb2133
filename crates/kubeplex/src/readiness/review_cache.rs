//! The recent verdicts on scrapers' tokens, so that a scraper asking every few seconds costs no
//! TokenReview or SubjectAccessReview each time: kept for a short while, at most so many, keyed by a
//! SHA-256 digest of the token (the token itself is not kept).

use std::time::Duration;

use indexmap::IndexMap;
use tokio::time::Instant;

/// How long a verdict holds: a revoked token or binding takes effect within it.
pub(super) const VERDICT_TTL: Duration = Duration::from_secs(10);
/// The most verdicts kept: a client trying token after token costs reviews, never memory.
pub(super) const MAX_VERDICTS: usize = 1024;

/// What a token is keyed by.
pub(super) type TokenDigest = [u8; 32];

/// The digest a token's verdict is kept under.
pub(super) fn digest(token: &str) -> TokenDigest {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest
        .as_ref()
        .try_into()
        .expect("a SHA-256 digest has 32 bytes")
}

/// Verdicts by token digest, oldest first (every verdict lives as long, so the oldest expires first).
pub(super) struct ReviewCache<V> {
    verdicts: IndexMap<TokenDigest, (V, Instant)>,
    ttl: Duration,
    capacity: usize,
}

impl<V: Clone> ReviewCache<V> {
    /// Verdicts that hold `ttl`, at most `capacity` of them.
    pub(super) fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            verdicts: IndexMap::new(),
            ttl,
            capacity: capacity.max(1),
        }
    }

    /// The verdict on `token`, if one was given within the TTL.
    pub(super) fn get(&mut self, token: &TokenDigest) -> Option<V> {
        self.expire();
        self.verdicts.get(token).map(|(verdict, _)| verdict.clone())
    }

    /// Keeps `verdict` on `token` for the TTL from now, making room by dropping the oldest.
    pub(super) fn put(&mut self, token: TokenDigest, verdict: V) {
        self.expire();
        self.verdicts.shift_remove(&token);
        while self.verdicts.len() >= self.capacity {
            self.verdicts.shift_remove_index(0);
        }
        let until = Instant::now().checked_add(self.ttl);
        let until = until.unwrap_or_else(Instant::now);
        self.verdicts.insert(token, (verdict, until));
    }

    /// Drops the verdicts whose time is over, from the oldest.
    fn expire(&mut self) {
        let now = Instant::now();
        let over = self
            .verdicts
            .values()
            .take_while(|(_, until)| *until <= now);
        let over = over.count();
        self.verdicts.drain(..over);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.verdicts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_verdict_holds_for_its_ttl_and_no_longer() {
        let mut cache = ReviewCache::new(VERDICT_TTL, MAX_VERDICTS);
        let token = digest("a-token");
        assert_eq!(cache.get(&token), None);
        cache.put(token, "allowed");
        tokio::time::advance(VERDICT_TTL - Duration::from_millis(1)).await;
        assert_eq!(cache.get(&token), Some("allowed"));
        assert_eq!(cache.get(&digest("another-token")), None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get(&token), None, "expired");
        assert_eq!(cache.len(), 0, "and dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_verdict_replaces_the_old_and_starts_its_ttl_again() {
        let mut cache = ReviewCache::new(VERDICT_TTL, MAX_VERDICTS);
        let token = digest("a-token");
        cache.put(token, "denied");
        tokio::time::advance(VERDICT_TTL / 2).await;
        cache.put(token, "allowed");
        tokio::time::advance(VERDICT_TTL / 2 + Duration::from_secs(1)).await;
        assert_eq!(cache.get(&token), Some("allowed"));
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_its_oldest_verdicts() {
        let mut cache = ReviewCache::new(VERDICT_TTL, 3);
        for token in ["a", "b", "c", "d"] {
            cache.put(digest(token), token);
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&digest("a")), None, "the oldest went");
        for token in ["b", "c", "d"] {
            assert_eq!(cache.get(&digest(token)), Some(token));
        }
    }

    #[test]
    fn tokens_are_kept_by_digest() {
        assert_ne!(digest("a"), digest("b"));
        assert_eq!(digest("a"), digest("a"));
        assert!(!digest("a-token").windows(7).any(|w| w == b"a-token"));
    }
}
