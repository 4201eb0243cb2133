//! The executor: the key queue every source of a controller's keys sends into (each key once, due times,
//! debounce), the runs it hands keys to (concurrency, requeues, stop), the retry backoff, and work tried
//! again by key. Knows nothing of Kubernetes.

mod backoff;
mod executor;
mod key_queue;
mod retries;

pub(crate) use backoff::RetryBackoff;
pub(crate) use executor::{ExecutorConfig, run};
#[cfg(test)]
pub(crate) use key_queue::key_queue;
pub(crate) use key_queue::{Fairness, KeySender, QueueKey};
#[cfg(test)]
pub(crate) use retries::LOG_AGAIN_AFTER;
pub(crate) use retries::{Failed, KeyedRetries};
