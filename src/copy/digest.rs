//! A table's fingerprint: its row count and a SHA-256 over its rows as a set, so the two
//! engines' sides agree whatever order each returns rows in. Values are hashed by storage
//! class and exact content (an integer 1 and a real 1.0 differ, as do '' and NULL).

use crate::api::TableDigest;
use rusqlite::types::Value;
use sha2::{Digest, Sha256};

/// Collects the row hashes of one table.
#[derive(Default)]
pub(crate) struct Collector {
    rows: Vec<[u8; 32]>,
}

impl Collector {
    pub(crate) fn add(&mut self, row: &[Value]) {
        let mut h = Sha256::new();
        for v in row {
            match v {
                Value::Null => h.update([0u8]),
                Value::Integer(i) => {
                    h.update([1u8]);
                    h.update(i.to_be_bytes());
                }
                Value::Real(f) => {
                    h.update([2u8]);
                    h.update(f.to_bits().to_be_bytes());
                }
                Value::Text(s) => {
                    h.update([3u8]);
                    h.update((s.len() as u64).to_be_bytes());
                    h.update(s.as_bytes());
                }
                Value::Blob(b) => {
                    h.update([4u8]);
                    h.update((b.len() as u64).to_be_bytes());
                    h.update(b);
                }
            }
        }
        self.rows.push(h.finalize().into());
    }

    pub(crate) fn finish(mut self, table: &str) -> TableDigest {
        self.rows.sort_unstable();
        let mut h = Sha256::new();
        for r in &self.rows {
            h.update(r);
        }
        TableDigest {
            table: table.to_string(),
            rows: self.rows.len() as u64,
            sha256: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(rows: &[Vec<Value>]) -> TableDigest {
        let mut c = Collector::default();
        rows.iter().for_each(|r| c.add(r));
        c.finish("t")
    }

    #[test]
    fn order_does_not_matter_and_every_difference_does() {
        let a = vec![Value::Integer(1), Value::Text("x".into())];
        let b = vec![Value::Integer(2), Value::Null];
        assert_eq!(digest(&[a.clone(), b.clone()]), digest(&[b.clone(), a.clone()]));
        assert_ne!(digest(std::slice::from_ref(&a)), digest(&[a.clone(), a.clone()]));
        for other in [
            vec![Value::Real(1.0), Value::Text("x".into())],
            vec![Value::Integer(1), Value::Text(String::new())],
            vec![Value::Integer(1), Value::Null],
            vec![Value::Integer(1), Value::Blob(b"x".to_vec())],
            vec![Value::Integer(1), Value::Text("x ".into())],
        ] {
            assert_ne!(
                digest(std::slice::from_ref(&a)),
                digest(std::slice::from_ref(&other)),
                "{other:?}"
            );
        }
        // Text boundaries are hashed: ("ab","c") is not ("a","bc").
        assert_ne!(
            digest(&[vec![Value::Text("ab".into()), Value::Text("c".into())]]),
            digest(&[vec![Value::Text("a".into()), Value::Text("bc".into())]])
        );
    }
}
