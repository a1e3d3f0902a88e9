//! Encoding and decoding of frames, with the size limit and typed errors.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::Value;

use crate::{ClientFrame, ErrorCode, PROTOCOL_VERSION, ServerFrame};

/// Why a frame was refused.
///
/// Every variant maps to an [`ErrorCode`] so that a receiver can answer with a typed `ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The frame is larger than the receiver accepts. Nothing of it was parsed.
    #[error("frame of {} bytes is over the limit of {} bytes", *.len as u64, *.max as u64)]
    TooLarge {
        /// Size of the refused frame, in bytes.
        len: usize,
        /// The limit it broke.
        max: usize,
    },
    /// The text is not a JSON object.
    #[error("frame is not a JSON object: {reason}")]
    Malformed {
        /// What the JSON parser said.
        reason: String,
    },
    /// The object has no string `type` field.
    #[error("frame has no \"type\" field")]
    MissingType {
        /// The frame's `id`, when it had one.
        frame_id: Option<String>,
    },
    /// The `type` names no frame known in this direction.
    #[error("unknown frame type {}", crate::Quoted(.type_name))]
    UnknownType {
        /// The unknown tag, as sent (truncated to 64 characters).
        type_name: String,
        /// The frame's `id`, when it had one.
        frame_id: Option<String>,
    },
    /// The frame type is known but its fields do not match.
    #[error("invalid {type_name} frame: {reason}")]
    Invalid {
        /// The frame's `type`.
        type_name: String,
        /// What did not match.
        reason: String,
        /// The frame's `id`, when it had one.
        frame_id: Option<String>,
    },
}

impl ProtocolError {
    /// The typed error code to report this refusal with.
    pub fn code(&self) -> ErrorCode {
        match self {
            ProtocolError::TooLarge { .. } => ErrorCode::FrameTooLarge,
            ProtocolError::UnknownType { .. } => ErrorCode::UnknownFrameType,
            ProtocolError::Malformed { .. } | ProtocolError::MissingType { .. } | ProtocolError::Invalid { .. } => {
                ErrorCode::MalformedFrame
            }
        }
    }

    /// The id of the refused frame, when it could be read.
    pub fn frame_id(&self) -> Option<&str> {
        match self {
            ProtocolError::TooLarge { .. } | ProtocolError::Malformed { .. } => None,
            ProtocolError::MissingType { frame_id }
            | ProtocolError::UnknownType { frame_id, .. }
            | ProtocolError::Invalid { frame_id, .. } => frame_id.as_deref(),
        }
    }
}

/// The two fields every frame has, read before the frame itself.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", borrow, default)]
    type_name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
}

fn decode<T: DeserializeOwned>(text: &str, max_bytes: usize, known: &[&str]) -> Result<T, ProtocolError> {
    if text.len() > max_bytes {
        return Err(ProtocolError::TooLarge { len: text.len(), max: max_bytes });
    }
    let envelope: Envelope<'_> =
        serde_json::from_str(text).map_err(|error| ProtocolError::Malformed { reason: error.to_string() })?;
    let frame_id = envelope.id.map(Cow::into_owned);
    let Some(type_name) = envelope.type_name else {
        return Err(ProtocolError::MissingType { frame_id });
    };
    if !known.contains(&type_name.as_ref()) {
        let type_name = type_name.chars().take(64).collect();
        return Err(ProtocolError::UnknownType { type_name, frame_id });
    }
    serde_json::from_str(text).map_err(|error| ProtocolError::Invalid {
        type_name: type_name.into_owned(),
        reason: error.to_string(),
        frame_id,
    })
}

/// Decodes a frame sent by a client, refusing anything over `max_bytes`.
pub fn decode_client_frame(text: &str, max_bytes: usize) -> Result<ClientFrame, ProtocolError> {
    decode(text, max_bytes, &ClientFrame::TYPES)
}

/// Decodes a frame sent by the server, refusing anything over `max_bytes`.
pub fn decode_server_frame(text: &str, max_bytes: usize) -> Result<ServerFrame, ProtocolError> {
    decode(text, max_bytes, &ServerFrame::TYPES)
}

/// Encodes a frame as JSON text.
pub fn encode_frame<F: Serialize>(frame: &F) -> String {
    // Frames hold only strings, numbers, maps with string keys and `serde_json::Value`s, so
    // serialising them cannot fail.
    serde_json::to_string(frame).expect("protocol frames always serialise")
}

/// The JSON Schema (2020-12) of the whole protocol, as checked in at `protocol.schema.json`.
///
/// The document validates any frame of either direction and records [`PROTOCOL_VERSION`] in
/// `x-protocol-version`.
pub fn protocol_schema() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let client = generator.subschema_for::<ClientFrame>();
    let server = generator.subschema_for::<ServerFrame>();
    let definitions = generator.take_definitions(true);
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://tether.invalid/protocol/v{PROTOCOL_VERSION}.schema.json"),
        "title": "Tether wire protocol",
        "x-protocol-version": PROTOCOL_VERSION,
        "anyOf": [client, server],
        "$defs": definitions,
    })
}
