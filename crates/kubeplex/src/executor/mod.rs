//! The executor: runs work for keys from a stream (concurrency, dedupe, requeues, stop), the key queue
//! that feeds it, and the retry backoff. Knows nothing of Kubernetes.

mod backoff;
mod executor;
mod key_queue;

pub(crate) use backoff::RetryBackoff;
pub(crate) use executor::{ExecutorConfig, run};
pub(crate) use key_queue::{KeySender, KeyStream, key_queue};
