//! Call ids exactly as sent. A JSON-RPC id may be any JSON number, and a
//! `serde_json::Value` keeps a number only as a 64-bit integer or an `f64`: the id
//! `18446744073709551616000` would come back as `1.8446744073709552e+22`, and `1e3` as
//! `1000.0`. So the id is kept as its JSON token, read from the document's text.
//!
//! Why not serde_json's `arbitrary_precision` feature, which makes every `Value` keep
//! its numbers' tokens: Cargo unifies features, so turning it on here would turn it on
//! for every crate of the build, and it changes more than ids. `canonical_json`
//! (operation ids, the idempotency keys of ADR 0004) would spell `1e3` and `1.50` as
//! sent instead of `1000.0` and `1.5`, so a call retried across the upgrade would get a
//! new operation id and could run twice; equal numbers written differently would stop
//! comparing equal; and crates built alone (`cargo test -p assent-domain`) would behave
//! otherwise than in the workspace. The `raw_value` feature used here only adds
//! `RawValue` (axum and sqlx turn it on already) and changes nothing else.

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A call's id exactly as the document sent it: `"c1"`, `7`, or
/// `18446744073709551616000`. The replies repeat it token for token
/// ([`crate::exact_reply_messages`]); serialized with serde_json's own serializer
/// (`to_string`, `to_writer`, axum's `Json`) it is written as sent, while
/// `serde_json::to_value` would read it back into a `Value` and may alter a number.
#[derive(Debug, Clone)]
pub struct SentId(Id);

#[derive(Debug, Clone)]
enum Id {
    /// Read from a `Value`: a string, or an integer within 64 bits, which a `Value`
    /// holds exactly.
    Value(Value),
    /// Read from the document's text: the token as sent.
    Token(Box<RawValue>),
}

impl SentId {
    /// The id as JSON text: a string with its quotes, or a number's token.
    pub fn json(&self) -> Cow<'_, str> {
        match &self.0 {
            Id::Value(value) => Cow::Owned(value.to_string()),
            Id::Token(token) => Cow::Borrowed(token.get()),
        }
    }

    /// The id as a [`Value`], when one holds it exactly: any string, an integer
    /// within 64 bits written as such (`7`, `-7`); `None` for a number a `Value` would
    /// write otherwise (`18446744073709551616000`, `1e3`, `1.0`, `-0`).
    pub fn to_value(&self) -> Option<Value> {
        let token = match &self.0 {
            Id::Value(value) => return Some(value.clone()),
            Id::Token(token) => token.get(),
        };
        match serde_json::from_str(token).ok()? {
            Value::Number(n) if (n.is_i64() || n.is_u64()) && n.to_string() == token => {
                Some(Value::Number(n))
            }
            Value::String(text) => Some(Value::String(text)),
            _ => None,
        }
    }

    /// The id of a call whose dialect sends string ids.
    pub(crate) fn string(id: &str) -> Self {
        Self(Id::Value(Value::String(id.to_owned())))
    }

    /// An MCP request id read from a [`Value`]: a string, or an integer within 64 bits.
    /// `None` for a number a `Value` may already have altered.
    pub(crate) fn from_value(id: &Value) -> Option<Self> {
        match id {
            Value::String(_) => Some(Self(Id::Value(id.clone()))),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Self(Id::Value(id.clone()))),
            _ => None,
        }
    }

    /// An id read from the document's text, as its token.
    pub(crate) fn from_token(token: &RawValue) -> Self {
        Self(Id::Token(token.to_owned()))
    }
}

impl Serialize for SentId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Id::Value(value) => value.serialize(serializer),
            Id::Token(token) => token.serialize(serializer),
        }
    }
}

/// Two ids are equal when they are written alike (`"A"` and `"\u0041"` are not).
impl PartialEq for SentId {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl Eq for SentId {}

impl Hash for SentId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.json().hash(state);
    }
}

impl fmt::Display for SentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.json())
    }
}

/// The raw `id` of each top-level element of an MCP document's text: of the one
/// request, or of each request of a batch, in order (`None` where an element has no
/// `id` or is no object). A key given twice counts once, the last time, as
/// [`Value`] reads it.
pub(super) fn tokens(
    text: &str,
    document: &Value,
) -> Result<Vec<Option<Box<RawValue>>>, serde_json::Error> {
    match document {
        Value::Array(_) => {
            let ids: Vec<IdOf> = serde_json::from_str(text)?;
            Ok(ids.into_iter().map(|id| id.0).collect())
        }
        Value::Object(_) => Ok(vec![serde_json::from_str::<IdOf>(text)?.0]),
        _ => Ok(Vec::new()),
    }
}

/// The raw `id` of one JSON value, if it is an object that has one.
struct IdOf(Option<Box<RawValue>>);

impl<'de> de::Deserialize<'de> for IdOf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IdVisitor)
    }
}

struct IdVisitor;

impl<'de> Visitor<'de> for IdVisitor {
    type Value = IdOf;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IdOf, A::Error> {
        let mut id = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "id" {
                id = Some(map.next_value::<Box<RawValue>>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(IdOf(id))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IdOf, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(IdOf(None))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<IdOf, E> {
        Ok(IdOf(None))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<IdOf, E> {
        Ok(IdOf(None))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<IdOf, E> {
        Ok(IdOf(None))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<IdOf, E> {
        Ok(IdOf(None))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<IdOf, E> {
        Ok(IdOf(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<IdOf, E> {
        Ok(IdOf(None))
    }
}
