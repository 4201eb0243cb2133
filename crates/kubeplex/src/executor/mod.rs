//! The executor: the key queue every source of a controller's keys sends into (each key once, due times,
//! debounce), the runs it hands keys to (concurrency, requeues, stop), and the retry backoff. Knows nothing
//! of Kubernetes.

mod backoff;
mod executor;
mod key_queue;

pub(crate) use backoff::RetryBackoff;
pub(crate) use executor::{ExecutorConfig, run};
#[cfg(test)]
pub(crate) use key_queue::key_queue;
pub(crate) use key_queue::{Fairness, KeySender, QueueKey};
