//! One SQL value as both engines hold it: SQLite's five storage classes (rusqlite's `Value`),
//! written to and read back from the PostgreSQL column types they map to (`ddl::pg_type`):
//! integer ↔ bigint, real ↔ double precision, text ↔ text, blob ↔ bytea. A value that does
//! not fit its column is an error, never converted.

use std::error::Error as StdError;

use bytes::BytesMut;
use rusqlite::types::Value;
use tokio_postgres::types::{to_sql_checked, IsNull, ToSql, Type};

use crate::error::{LcmError, Result};

/// A value as a statement parameter.
#[derive(Debug)]
pub(crate) struct Param<'a>(pub &'a Value);

type BoxError = Box<dyn StdError + Sync + Send>;

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        match (self.0, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(i), &Type::INT8) => i.to_sql(ty, out),
            (Value::Integer(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Value::Integer(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Value::Real(f), &Type::FLOAT8) => f.to_sql(ty, out),
            // A whole number where the server expects a real (`?1 * 0.5`): exact below 2^53.
            (Value::Integer(i), &Type::FLOAT8) if i.unsigned_abs() < (1 << 53) => (*i as f64).to_sql(ty, out),
            (Value::Text(s), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME) => s.as_str().to_sql(ty, out),
            (Value::Blob(b), &Type::BYTEA) => b.as_slice().to_sql(ty, out),
            (value, ty) => Err(format!("a {} value does not fit a {ty} column", storage_class(value)).into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// The parameters as tokio-postgres takes them.
pub(crate) fn refs<'p>(params: &'p [Param<'_>]) -> Vec<&'p (dyn ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
}

/// SQLite's name for the value's storage class (`typeof()`).
pub(crate) fn storage_class(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Integer(_) => "integer",
        Value::Real(_) => "real",
        Value::Text(_) => "text",
        Value::Blob(_) => "blob",
    }
}

/// Column `i` of a PostgreSQL row as the value SQLite would hold.
pub(crate) fn read(row: &tokio_postgres::Row, i: usize) -> Result<Value> {
    let ty = row.columns()[i].type_().clone();
    let got = |e: tokio_postgres::Error| LcmError::Internal(format!("reading a {ty} column: {e}"));
    Ok(match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(got)?.map(Value::Integer),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map_err(got)?
            .map(|v| Value::Integer(v.into())),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .map_err(got)?
            .map(|v| Value::Integer(v.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i).map_err(got)?.map(Value::Real),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map_err(got)?
            .map(|v| Value::Integer(v.into())),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
            row.try_get::<_, Option<String>>(i).map_err(got)?.map(Value::Text)
        }
        Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(i).map_err(got)?.map(Value::Blob),
        other => {
            return Err(LcmError::schema(
                "postgres",
                format!(
                    "column {} has type {other}, which lcm-native does not store",
                    row.columns()[i].name()
                ),
            ))
        }
    }
    .unwrap_or(Value::Null))
}
