//! The server's own rules, applied whatever a client says about itself: who may connect
//! ([`access`]: origins and tokens) and the operator's risk floors for tools ([`risk_floor`]).

mod access;
mod risk_floor;

pub(crate) use access::{origin_allowed, presented_token, same_secret, token_accepted};
pub(crate) use risk_floor::floor_for;
pub use risk_floor::{RiskFloor, glob_matches};
