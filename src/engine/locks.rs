//! One mutating operation per conversation at a time (passes, sweeps, rewrites): in this
//! process, and on PostgreSQL across every gateway. A second caller waits for the first, up to
//! `lockTimeoutMs`, then gives up with E_BUSY. Ingest does not take this lock: it only appends,
//! and passes are written so that appends made while the summarizer runs are kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

use crate::error::{LcmError, Result};
use crate::sql::Backend;

/// A conversation's operation lock, held for an operation's life: this process's, and on
/// PostgreSQL every gateway's.
pub(super) struct Turn {
    _local: OwnedMutexGuard<()>,
    _across: Option<crate::pg::pool::HeldLock>,
}

impl Turn {
    /// Says, once the lock across gateways is lost while held, why (PostgreSQL through a
    /// transaction pooler: a lease that ran out).
    pub(super) fn lost(&self) -> Option<tokio::sync::watch::Receiver<Option<String>>> {
        self._across.as_ref().and_then(crate::pg::pool::HeldLock::lost)
    }
}

#[derive(Default)]
pub(super) struct ConversationLocks {
    map: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

impl ConversationLocks {
    /// The conversation's operation lock, waited for until `timeout_ms` (E_BUSY) or until
    /// `closed` turns true (E_CLOSED). This process's own wait comes first, so that one
    /// process asks a PostgreSQL server once.
    pub(super) async fn turn(
        &self,
        backend: &Backend,
        conversation_id: i64,
        timeout_ms: i64,
        mut closed: tokio::sync::watch::Receiver<bool>,
    ) -> Result<Turn> {
        let local = tokio::select! {
            guard = self.acquire(conversation_id, timeout_ms) => guard,
            _ = closed.wait_for(|c| *c) => Err(LcmError::Closed),
        }?;
        let wait = Duration::from_millis(timeout_ms.max(0) as u64);
        let across = tokio::task::block_in_place(|| backend.operation_lock(conversation_id, wait))?;
        Ok(Turn {
            _local: local,
            _across: across,
        })
    }

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
