//! The JSON contract: every command's JSON carries `schema_version`, and its shape is
//! described by `schema/threadbalance.schema.json` in the repository (one definition per
//! command under `$defs`), which the tests validate every command's output against.
//!
//! The version changes when a field is removed, renamed or changes type; adding a field
//! does not change it (readers ignore fields they do not know).

use serde::Serialize;
use serde_json::Value;

/// The version of the JSON's shape this binary writes.
pub const SCHEMA_VERSION: u32 = 1;

/// `value` with `schema_version` in front of its own fields.
#[derive(Debug, Serialize)]
pub struct Versioned<'a, T: Serialize> {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The output itself.
    #[serde(flatten)]
    pub value: &'a T,
}

/// Wraps `value` with the schema version.
pub fn versioned<T: Serialize>(value: &T) -> Versioned<'_, T> {
    Versioned {
        schema_version: SCHEMA_VERSION,
        value,
    }
}

/// A JSON object built by hand (the simulator's results) with `schema_version` added.
pub fn stamp(mut value: Value) -> Value {
    if let Value::Object(map) = &mut value {
        map.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_puts_the_version_beside_the_fields() {
        #[derive(Serialize)]
        struct Out {
            wall_s: f64,
        }
        let v = serde_json::to_value(versioned(&Out { wall_s: 1.5 })).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"schema_version": SCHEMA_VERSION, "wall_s": 1.5})
        );
        let v = stamp(serde_json::json!({"results": []}));
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
    }
}
