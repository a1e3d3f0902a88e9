//! [`RunId`] and [`CallId`]: the ids of runs and tool calls, so that neither is a bare string.
//!
//! On the wire both are JSON strings (`runId`, `callId`): the types are transparent to serde
//! and to the JSON Schema. Their `Debug` is the string's (`"r1"`, not `RunId("r1")`), so
//! messages and logs that format an id read as before.

use std::borrow::{Borrow, Cow};
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// Defines a string newtype with the conversions and comparisons every id has.
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        #[repr(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as sent.
            #[inline]
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's string, without copying it.
            #[inline]
            pub fn into_string(self) -> String {
                self.0
            }
        }

        /// The schema of a string, inline: the JSON Schema reads as if the field were a `String`.
        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> Cow<'static, str> {
                String::schema_name()
            }

            fn schema_id() -> Cow<'static, str> {
                String::schema_id()
            }

            fn json_schema(generator: &mut SchemaGenerator) -> Schema {
                String::json_schema(generator)
            }
        }

        impl From<String> for $name {
            #[inline]
            fn from(id: String) -> Self {
                $name(id)
            }
        }

        impl From<&str> for $name {
            #[inline]
            fn from(id: &str) -> Self {
                $name(id.to_string())
            }
        }

        impl From<&String> for $name {
            #[inline]
            fn from(id: &String) -> Self {
                $name(id.clone())
            }
        }

        impl From<$name> for String {
            #[inline]
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl Borrow<str> for $name {
            #[inline]
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            #[inline]
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            #[inline]
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        /// The string's `Debug` (`"r1"`), so that ids read the same in messages as before.
        impl fmt::Debug for $name {
            #[inline]
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl PartialEq<str> for $name {
            #[inline]
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            #[inline]
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<$name> for str {
            #[inline]
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            #[inline]
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
}

string_id! {
    /// The id of an agent run (`runId` on the wire): one per user message, chosen by the server.
    RunId
}

string_id! {
    /// The id of a tool call (`callId` on the wire): unique in its conversation, chosen by the
    /// server (`local-…` for a call the browser runtime starts itself). A result names its call by it.
    CallId
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn an_id_is_its_string_on_the_wire_in_messages_and_in_maps() {
        let id = CallId::from("k1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"k1\"");
        assert_eq!(serde_json::from_str::<CallId>("\"k1\"").unwrap(), id);
        assert_eq!((format!("{id}"), format!("{id:?}")), ("k1".to_string(), "\"k1\"".to_string()));
        let seen: HashSet<CallId> = [id.clone()].into();
        assert!(seen.contains("k1") && id == "k1");
        assert_eq!("k1", id);
        assert_eq!(RunId::from(String::from("r")).into_string(), "r");
    }
}
