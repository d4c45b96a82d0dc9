//! Canonical JSON: one byte string per JSON value, whatever order its keys came in.
//!
//! Operation ids and redundancy comparisons hash or compare arguments; two argument
//! objects that differ only in key order must be the same proposal. We do not rely on
//! `serde_json::Map` being sorted, because a `preserve_order` feature enabled anywhere
//! in a dependant's graph would silently change that.

use serde_json::Value;

/// Serialises `value` with object keys sorted recursively and no insignificant
/// whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_recursively() {
        let a = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": 1}], "c": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"z":[1,{"x":1,"y":2}]},"b":1}"#
        );
    }

    #[test]
    fn escapes_keys_and_strings() {
        let a = json!({"k\"ey": "va\nl"});
        assert_eq!(canonical_json(&a), r#"{"k\"ey":"va\nl"}"#);
    }

    #[test]
    fn array_order_is_significant() {
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
    }
}
