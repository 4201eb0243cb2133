//! What every reconcile of a `__fairness` process does and records, whichever side runs it: the work of a
//! change, when each quiet change was first handled, and when the flood was drained.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::spec::{FLOOD_PREFIX, QUIET_OBJECT};

/// The value of `data.seq` a flood write sets (after the run's token).
pub(super) const FLOOD_VALUE: &str = "f";
/// The prefix of a quiet write's `data.seq` (after the run's token), followed by its number.
pub(super) const QUIET_VALUE: &str = "q";

pub(super) struct Probe {
    base: Instant,
    /// Prefixes this run's `seq` values: a value an earlier run left is no change of this run.
    pub(super) token: String,
    work: Duration,
    /// The baseline's limit shared by its per-context controllers, so both sides run as many at once.
    global: Option<Semaphore>,
    /// Every reconcile, changed or not.
    pub(super) reconciles: AtomicUsize,
    /// Per quiet write: 1 + ns (since `base`) at which it was sent; 0 until then.
    quiet_sent: Vec<AtomicU64>,
    /// Per quiet write: 1 + ns at which the work of the first reconcile that saw it, or a later write, began.
    quiet_seen: Vec<AtomicU64>,
    /// Per quiet write: 1 + ns at which the process's own watch of the quiet object (beside the side's)
    /// first delivered it or a later write: how much of the latency is the servers' and the watch's.
    quiet_arrived: Vec<AtomicU64>,
    /// The first quiet write not yet seen.
    quiet_floor: Mutex<usize>,
    /// Quiet writes seen only through a later one.
    pub(super) coalesced: AtomicUsize,
    flood_done: Vec<AtomicBool>,
    /// Flood changes reconciled.
    pub(super) flood_reconciled: AtomicUsize,
    /// 1 + ns at which the last flood change was reconciled; 0 until then.
    drained_at: AtomicU64,
    pub(super) drained: Notify,
}

impl Probe {
    pub(super) fn new(
        base: Instant,
        work: Duration,
        global: Option<Semaphore>,
        quiet_writes: usize,
        flood: usize,
    ) -> Self {
        Self {
            base,
            token: format!("{}.", std::process::id()),
            work,
            global,
            reconciles: AtomicUsize::new(0),
            quiet_sent: (0..quiet_writes).map(|_| AtomicU64::new(0)).collect(),
            quiet_seen: (0..quiet_writes).map(|_| AtomicU64::new(0)).collect(),
            quiet_arrived: (0..quiet_writes).map(|_| AtomicU64::new(0)).collect(),
            quiet_floor: Mutex::new(0),
            coalesced: AtomicUsize::new(0),
            flood_done: (0..flood).map(|_| AtomicBool::new(false)).collect(),
            flood_reconciled: AtomicUsize::new(0),
            drained_at: AtomicU64::new(0),
            drained: Notify::new(),
        }
    }

    pub(super) fn ns(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub(super) fn quiet_capacity(&self) -> usize {
        self.quiet_sent.len()
    }

    /// Stamps quiet write `seq` as sent now: just before its request, since its watch event can reach a
    /// reconcile before the write's own response reaches the writer.
    pub(super) fn quiet_sending(&self, seq: usize) {
        self.quiet_sent[seq].store(self.ns() + 1, Ordering::Release);
    }

    /// 1 + ns at which the flood was drained, 0 while it is not.
    pub(super) fn drained_at(&self) -> u64 {
        self.drained_at.load(Ordering::Acquire)
    }

    /// One reconcile of `object`. Only a change this run wrote is work: an object as an earlier run left it
    /// (the initial list) is up to date, and returns at once.
    pub(super) async fn reconcile(&self, object: &ConfigMap) {
        // The baseline's work waits for a slot of the shared limit; kubeplex's executor holds its own
        // before the reconcile is called. Either way the latency runs to the start of the work.
        let _permit = match &self.global {
            Some(limit) => Some(limit.acquire().await),
            None => None,
        };
        let start = self.ns();
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let Some(value) = object
            .data
            .as_ref()
            .and_then(|d| d.get("seq"))
            .and_then(|s| s.strip_prefix(self.token.as_str()))
        else {
            return;
        };
        let name = object.metadata.name.as_deref().unwrap_or_default();
        if name == QUIET_OBJECT {
            if let Some(seq) = value
                .strip_prefix(QUIET_VALUE)
                .and_then(|s| s.parse::<usize>().ok())
            {
                self.quiet_seen_through(seq, start);
            }
            tokio::time::sleep(self.work).await;
        } else if let Some(index) = name
            .strip_prefix(FLOOD_PREFIX)
            .and_then(|i| i.parse::<usize>().ok())
            && value == FLOOD_VALUE
            && let Some(done) = self.flood_done.get(index)
        {
            tokio::time::sleep(self.work).await;
            if !done.swap(true, Ordering::AcqRel)
                && self.flood_reconciled.fetch_add(1, Ordering::AcqRel) + 1 == self.flood_done.len()
            {
                self.drained_at.store(self.ns() + 1, Ordering::Release);
                self.drained.notify_waiters();
            }
        }
    }

    /// A reconcile whose work began at `start` saw quiet write `seq`: it handles every earlier write sent
    /// before it began that no reconcile saw yet (those waited together, coalesced into one key).
    fn quiet_seen_through(&self, seq: usize, start: u64) {
        let mut floor = self.quiet_floor.lock();
        while *floor <= seq && *floor < self.quiet_seen.len() {
            let sent = self.quiet_sent[*floor].load(Ordering::Acquire);
            if sent == 0 || start + 1 < sent {
                break;
            }
            self.quiet_seen[*floor].store(start + 1, Ordering::Relaxed);
            if *floor < seq {
                self.coalesced.fetch_add(1, Ordering::Relaxed);
            }
            *floor += 1;
        }
    }

    /// The process's own watch delivered quiet write `seq`: it stands for every earlier write not delivered
    /// yet (a watch may skip none, but the first arrival is what counts).
    pub(super) fn quiet_arrived(&self, seq: usize) {
        let now = self.ns() + 1;
        for slot in self.quiet_arrived.iter().take(seq + 1).rev() {
            if slot
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                break;
            }
        }
    }

    /// Quiet write sent -> the process's own watch delivered it, in ms, for writes `from..to` sent no later
    /// than `until`.
    pub(super) fn quiet_deliveries(&self, from: usize, to: usize, until: u64) -> Vec<f64> {
        (from..to.min(self.quiet_sent.len()))
            .filter_map(|seq| {
                let sent = self.quiet_sent[seq].load(Ordering::Acquire);
                let arrived = self.quiet_arrived[seq].load(Ordering::Relaxed);
                (sent != 0 && sent <= until && arrived != 0)
                    .then(|| arrived.saturating_sub(sent) as f64 / 1e6)
            })
            .collect()
    }

    /// The latencies in ms of quiet writes `from..to` sent no later than `until` (1 + ns), and how many of
    /// them no reconcile saw.
    pub(super) fn quiet_latencies(&self, from: usize, to: usize, until: u64) -> (Vec<f64>, usize) {
        let mut latencies = Vec::new();
        let mut unseen = 0;
        for seq in from..to.min(self.quiet_sent.len()) {
            let sent = self.quiet_sent[seq].load(Ordering::Acquire);
            if sent == 0 || sent > until {
                continue;
            }
            match self.quiet_seen[seq].load(Ordering::Relaxed) {
                0 => unseen += 1,
                seen => latencies.push(seen.saturating_sub(sent) as f64 / 1e6),
            }
        }
        (latencies, unseen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet(probe: &Probe, seq: usize) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(QUIET_OBJECT.into());
        object.data = Some(
            [(
                "seq".to_owned(),
                format!("{}{QUIET_VALUE}{seq}", probe.token),
            )]
            .into(),
        );
        object
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_handles_every_earlier_quiet_write_waiting_with_its_own() {
        let probe = Probe::new(Instant::now(), Duration::ZERO, None, 4, 0);
        probe.quiet_sending(0);
        tokio::time::advance(Duration::from_millis(2)).await;
        probe.quiet_sending(1);
        tokio::time::advance(Duration::from_millis(3)).await;
        // The reconcile sees write 1 only, 5 ms after write 0 and 3 ms after write 1: both are handled.
        probe.reconcile(&quiet(&probe, 1)).await;
        probe.quiet_sending(2);
        let (latencies, unseen) = probe.quiet_latencies(0, 4, u64::MAX);
        assert_eq!(unseen, 1, "write 2 waits");
        assert_eq!(latencies.len(), 2, "{latencies:?}");
        assert!(
            (latencies[0] - 5.0).abs() < 0.1 && (latencies[1] - 3.0).abs() < 0.1,
            "{latencies:?}"
        );
        assert_eq!(probe.coalesced.load(Ordering::Relaxed), 1);
        // A write sent after `until` is left out: write 1 was sent 2 ms in.
        let (early, unseen) = probe.quiet_latencies(0, 4, 2_000_000);
        assert_eq!((early.len(), unseen), (1, 0), "{early:?}");
    }
}
