//! Pages' tools for MCP clients, in a build without the `mcp` feature: never offered. A pairing
//! entry a page sends is taken out of its context and refused, as with `--expose-mcp` off.

use tether_protocol::ContextEntry;

/// The context key under which a page offers its tools to a paired MCP client (see the `mcp`
/// feature). Never stored, never shown to the model.
pub const PAIRING_KEY: &str = "tether-mcp-pairing";

/// No session is ever paired.
#[derive(Debug, Default)]
pub(crate) struct Exposed {}

impl Exposed {
    /// Takes a pairing entry out of `context`; one that was there is refused.
    pub(crate) fn take_pairing(
        &self,
        _enabled: bool,
        _session: &str,
        context: &mut Vec<ContextEntry>,
    ) -> Result<(), String> {
        let before = context.len();
        context.retain(|entry| entry.key != PAIRING_KEY);
        if context.len() == before {
            Ok(())
        } else {
            Err("this server was built without MCP (tether-server's `mcp` feature); the pairing entry was ignored"
                .into())
        }
    }

    /// Nothing is paired.
    pub(crate) fn unpair(&self, _session: &str) {}

    /// Nobody listens.
    pub(crate) fn tools_changed(&self, _session: &str) {}
}
