//! One mutating operation per conversation at a time (passes, sweeps, rewrites). A second
//! caller waits for the first, up to `lockTimeoutMs`, then gives up with E_BUSY. Ingest does
//! not take this lock: it only appends, and passes are written so that appends made while the
//! summarizer runs are kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::error::{LcmError, Result};

#[derive(Default)]
pub(super) struct ConversationLocks {
    map: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

impl ConversationLocks {
    pub(super) async fn acquire(&self, conversation_id: i64, timeout_ms: i64) -> Result<OwnedMutexGuard<()>> {
        let lock = self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(conversation_id)
            .or_default()
            .clone();
        tokio::time::timeout(Duration::from_millis(timeout_ms.max(0) as u64), lock.lock_owned())
            .await
            .map_err(|_| LcmError::Busy {
                sqlite: None,
                conversation_id: Some(conversation_id),
                message: format!(
                    "another operation on conversation {conversation_id} is still running after {timeout_ms} ms; \
                         retry later or raise lockTimeoutMs"
                ),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_caller_waits_then_gives_up_with_e_busy() {
        let locks = Arc::new(ConversationLocks::default());
        let held = locks.acquire(1, 100).await.unwrap();
        // Another conversation is not blocked.
        let other = locks.acquire(2, 10).await;
        assert!(other.is_ok());
        let err = locks.acquire(1, 30).await.unwrap_err();
        assert_eq!(err.code(), "E_BUSY");
        // Once released, the next caller gets it.
        let l2 = locks.clone();
        let waiter = tokio::spawn(async move { l2.acquire(1, 1000).await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap().is_ok());
    }
}
