//! The tool registry: which tools are active now, who owns them, and what the server was told.
//!
//! The registry enforces the product's rules: one tool per name (registering a name again
//! replaces the tool), every tool has an owner component whose unmount removes its tools (but
//! not its `global` ones), and at most `cap` tools are active; past the cap a tool is refused
//! with [`CoreError::ToolLimit`] and a [`RegistryEvent::Refused`] event named
//! `tool.registry.limit`, never silently. A change journal turns any number of changes between
//! two [`ToolRegistry::flush`] calls into at most one [`ContextSnapshot`].

use serde_json::Value;
use tether_protocol::{ContextEntry, DEFAULT_MAX_ACTIVE_TOOLS, MAX_CONTEXT_BYTES, MAX_CONTEXT_ENTRIES, Risk, ToolSpec};

use crate::CoreError;
use crate::validate::Validator;

/// The name of the event emitted when a tool is refused because the registry is full.
pub const LIMIT_EVENT: &str = "tool.registry.limit";

/// The name of the event emitted when app state for the agent is refused as over its limits.
pub const CONTEXT_LIMIT_EVENT: &str = "agent.context.limit";

/// How many refused registrations the registry remembers for inspection.
const MAX_REFUSED_KEPT: usize = 64;

/// Longest tool name accepted (the limit OpenAI-compatible providers apply).
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// Identifies the component that registered a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerId(pub u64);

/// A tool as a component declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// What the model sees: name, description, argument schema, risk, global.
    pub spec: ToolSpec,
    /// How long the handler may run before the call ends as `timeout`; `None` uses the
    /// executor's default (10 s).
    pub timeout_ms: Option<u64>,
}

impl ToolDef {
    /// A tool with an empty-object argument schema, risk `none`, not global, followed up.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        // Spelled out rather than `ToolSpec::new`: this path is in the browser runtime, and the
        // call measured 57 bytes gzip more (the budget is 60,000).
        ToolDef {
            spec: ToolSpec {
                name: name.into(),
                description: description.into(),
                parameters: serde_json::json!({"type": "object"}),
                risk: Risk::None,
                global: false,
                follow_up: true,
            },
            timeout_ms: None,
        }
    }

    /// Sets the JSON Schema of the arguments.
    #[must_use]
    pub fn parameters(mut self, schema: Value) -> Self {
        self.spec.parameters = schema;
        self
    }

    /// Sets the risk level.
    #[must_use]
    pub fn risk(mut self, risk: Risk) -> Self {
        self.spec.risk = risk;
        self
    }

    /// Marks the tool as global: it survives its owner's unmount (navigation).
    #[must_use]
    pub fn global(mut self, global: bool) -> Self {
        self.spec.global = global;
        self
    }

    /// `false`: a run ends once a call of this tool succeeded, without asking the model again
    /// (the tool's rendered result is the answer). Default `true`.
    #[must_use]
    pub fn follow_up(mut self, follow_up: bool) -> Self {
        self.spec.follow_up = follow_up;
        self
    }

    /// Sets the handler timeout for this tool.
    #[must_use]
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }
}

/// A registered tool with its handler and compiled schema.
#[derive(Debug)]
pub struct RegisteredTool<H, S> {
    def: ToolDef,
    owner: OwnerId,
    handler: H,
    schema: S,
    resolver: Option<String>,
}

impl<H, S> RegisteredTool<H, S> {
    /// The tool's declaration.
    pub fn def(&self) -> &ToolDef {
        &self.def
    }

    /// What the model sees of the tool.
    pub fn spec(&self) -> &ToolSpec {
        &self.def.spec
    }

    /// The component that registered it.
    pub fn owner(&self) -> OwnerId {
        self.owner
    }

    /// The handler, as the edge stored it.
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The compiled argument schema.
    pub fn schema(&self) -> &S {
        &self.schema
    }

    /// The resolver prefix, when the tool belongs to a resolver group.
    pub fn resolver(&self) -> Option<&str> {
        self.resolver.as_deref()
    }
}

/// A registration that was refused, kept for inspection (dev tools show them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedTool {
    /// The refused tool's name.
    pub name: String,
    /// The component that tried to register it.
    pub owner: OwnerId,
    /// Why it was refused.
    pub error: CoreError,
}

/// Something that changed in the registry. Drained with [`ToolRegistry::drain_events`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryEvent {
    /// A new tool became active.
    Registered {
        /// Its name.
        name: String,
    },
    /// A tool of an existing name replaced the previous one.
    Replaced {
        /// Its name.
        name: String,
    },
    /// A tool left the registry.
    Unregistered {
        /// Its name.
        name: String,
    },
    /// A tool was refused (over the cap, or an invalid name or schema).
    Refused {
        /// Its name.
        name: String,
        /// Why.
        error: CoreError,
    },
}

impl RegistryEvent {
    /// The event's name as dev tools and callbacks see it, e.g. `tool.registry.limit`.
    pub fn name(&self) -> &'static str {
        match self {
            RegistryEvent::Registered { .. } => "tool.registry.registered",
            RegistryEvent::Replaced { .. } => "tool.registry.replaced",
            RegistryEvent::Unregistered { .. } => "tool.registry.unregistered",
            RegistryEvent::Refused { error: CoreError::ToolLimit { .. }, .. } => LIMIT_EVENT,
            RegistryEvent::Refused { error: CoreError::ContextLimit { .. }, .. } => CONTEXT_LIMIT_EVENT,
            RegistryEvent::Refused { .. } => "tool.registry.refused",
        }
    }
}

/// Whether a registration added a tool or replaced one of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// The name was new.
    Added,
    /// A tool of that name was replaced.
    Replaced,
}

/// The full tool list and app state to announce, with its revision: one `CONTEXT_UPDATE`.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextSnapshot {
    /// Strictly increasing per registry.
    pub revision: u64,
    /// Every active tool, in registration order.
    pub tools: Vec<ToolSpec>,
    /// Every piece of app state shared with the agent, in the order it was first set.
    pub context: Vec<ContextEntry>,
}

/// The registry of active tools. `H` is whatever the edge runs for a tool (a closure, a JS
/// function); `V` compiles argument schemas.
#[derive(Debug)]
pub struct ToolRegistry<H, V: Validator> {
    validator: V,
    tools: Vec<RegisteredTool<H, V::Compiled>>,
    cap: u32,
    refused: Vec<RefusedTool>,
    events: Vec<RegistryEvent>,
    revision: u64,
    dirty: bool,
    last_sent: Option<(Vec<ToolSpec>, Vec<ContextEntry>)>,
    context: Vec<(OwnerId, ContextEntry)>,
}

/// Checks a tool name: 1 to 64 characters of `A-Z a-z 0-9 _ -`.
pub fn check_tool_name(name: &str) -> Result<(), CoreError> {
    let reason = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_TOOL_NAME_LEN {
        "it is longer than 64 characters"
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        "only letters, digits, '_' and '-' are allowed"
    } else {
        return Ok(());
    };
    Err(CoreError::InvalidToolName { name: name.to_string(), reason })
}

/// Joins a resolver prefix and a tool suffix: `cart` or `cart_` with `view` gives `cart_view`.
pub fn resolver_tool_name(prefix: &str, suffix: &str) -> String {
    if prefix.ends_with('_') { format!("{prefix}{suffix}") } else { format!("{prefix}_{suffix}") }
}

impl<H, V: Validator> ToolRegistry<H, V> {
    /// An empty registry with the default cap of 30 tools.
    pub fn new(validator: V) -> Self {
        ToolRegistry {
            validator,
            tools: Vec::new(),
            cap: DEFAULT_MAX_ACTIVE_TOOLS,
            refused: Vec::new(),
            events: Vec::new(),
            revision: 0,
            dirty: false,
            last_sent: None,
            context: Vec::new(),
        }
    }

    /// The validator that compiles schemas.
    pub fn validator(&self) -> &V {
        &self.validator
    }

    /// The most tools that may be active at once.
    pub fn cap(&self) -> u32 {
        self.cap
    }

    /// Sets the cap (from the server's `maxActiveTools`). If more tools are active than the new
    /// cap allows, the most recently registered ones are removed and refused loudly; their
    /// names are returned.
    pub fn set_cap(&mut self, cap: u32) -> Vec<String> {
        self.cap = cap;
        let mut evicted = Vec::new();
        while self.tools.len() > cap as usize {
            let Some(tool) = self.tools.pop() else { break };
            let name = tool.def.spec.name;
            self.refuse(name.clone(), tool.owner, CoreError::ToolLimit { name: name.clone(), cap });
            self.events.push(RegistryEvent::Unregistered { name: name.clone() });
            self.dirty = true;
            evicted.push(name);
        }
        evicted
    }

    fn refuse(&mut self, name: String, owner: OwnerId, error: CoreError) {
        self.events.push(RegistryEvent::Refused { name: name.clone(), error: error.clone() });
        self.refused.retain(|refused| refused.name != name);
        if self.refused.len() == MAX_REFUSED_KEPT {
            self.refused.remove(0);
        }
        self.refused.push(RefusedTool { name, owner, error });
    }

    /// Registers a tool for `owner`, replacing any tool of the same name.
    ///
    /// Refused, with an event, when the name is invalid, the schema does not compile, or the
    /// registry is full.
    pub fn register(&mut self, owner: OwnerId, def: ToolDef, handler: H) -> Result<Registered, CoreError> {
        self.insert(owner, def, handler, None)
    }

    /// Registers a resolver's tools: each is named `prefix_suffix`, owned by `owner`, and
    /// tagged with the prefix so the edge runs the resolver's hooks around its handler.
    /// Each tool is admitted or refused on its own (the cap applies per tool).
    pub fn register_resolver(
        &mut self,
        owner: OwnerId,
        prefix: &str,
        tools: Vec<(ToolDef, H)>,
    ) -> Vec<Result<Registered, CoreError>> {
        tools
            .into_iter()
            .map(|(mut def, handler)| {
                def.spec.name = resolver_tool_name(prefix, &def.spec.name);
                self.insert(owner, def, handler, Some(prefix.to_string()))
            })
            .collect()
    }

    fn insert(
        &mut self,
        owner: OwnerId,
        def: ToolDef,
        handler: H,
        resolver: Option<String>,
    ) -> Result<Registered, CoreError> {
        let name = def.spec.name.clone();
        let compiled = check_tool_name(&name).and_then(|()| {
            self.validator
                .compile(&def.spec.parameters)
                .map_err(|source| CoreError::ToolSchema { tool: name.clone(), source: Box::new(source) })
        });
        let schema = match compiled {
            Ok(schema) => schema,
            Err(error) => {
                self.refuse(name, owner, error.clone());
                return Err(error);
            }
        };
        let tool = RegisteredTool { def, owner, handler, schema, resolver };
        self.refused.retain(|refused| refused.name != name);
        self.dirty = true;
        if let Some(existing) = self.tools.iter_mut().find(|t| t.def.spec.name == name) {
            *existing = tool;
            self.events.push(RegistryEvent::Replaced { name });
            return Ok(Registered::Replaced);
        }
        if self.tools.len() >= self.cap as usize {
            let error = CoreError::ToolLimit { name: name.clone(), cap: self.cap };
            self.refuse(name, owner, error.clone());
            return Err(error);
        }
        self.tools.push(tool);
        self.events.push(RegistryEvent::Registered { name });
        Ok(Registered::Added)
    }

    /// Removes the tool named `name`, whoever owns it. Returns whether it existed.
    pub fn unregister(&mut self, name: &str) -> bool {
        self.remove_where(|tool| tool.def.spec.name == name).len() == 1
    }

    /// Removes the tool named `name` only if `owner` still owns it (a tool replaced by
    /// another component stays). Returns whether it was removed.
    pub fn unregister_owned(&mut self, owner: OwnerId, name: &str) -> bool {
        self.remove_where(|tool| tool.owner == owner && tool.def.spec.name == name).len() == 1
    }

    /// Removes every non-global tool and every context entry of `owner` (the component
    /// unmounted) and forgets its refused registrations. Returns the tool names removed.
    pub fn unregister_owner(&mut self, owner: OwnerId) -> Vec<String> {
        self.refused.retain(|refused| refused.owner != owner);
        let before = self.context.len();
        self.context.retain(|(o, _)| *o != owner);
        self.dirty |= self.context.len() != before;
        self.remove_where(|tool| tool.owner == owner && !tool.def.spec.global)
    }

    /// Shares app state with the agent for `owner` (a component), replacing the entry of the
    /// same key. Refused loudly (an `agent.context.limit` event) when the key is not a valid
    /// name, or when it would make more than [`MAX_CONTEXT_ENTRIES`] entries or more than
    /// [`MAX_CONTEXT_BYTES`] of JSON together; the entry it would replace is then removed too,
    /// so the agent never reads a stale value.
    pub fn set_context(&mut self, owner: OwnerId, entry: ContextEntry) -> Result<(), CoreError> {
        let position = self.context.iter().position(|(_, e)| e.key == entry.key);
        let size = |e: &ContextEntry| {
            crate::json::json_len(&Value::String(e.description.clone())) + crate::json::json_len(&e.value)
        };
        let others: usize = self.context.iter().filter(|(_, e)| e.key != entry.key).map(|(_, e)| size(e)).sum();
        let count = self.context.len() + usize::from(position.is_none());
        if check_tool_name(&entry.key).is_err()
            || count > MAX_CONTEXT_ENTRIES
            || others + size(&entry) > MAX_CONTEXT_BYTES
        {
            if let Some(position) = position {
                self.context.remove(position);
                self.dirty = true;
            }
            let error = CoreError::ContextLimit { key: entry.key.clone() };
            self.refuse(entry.key, owner, error.clone());
            return Err(error);
        }
        self.dirty = true;
        match position {
            Some(position) => self.context[position] = (owner, entry),
            None => self.context.push((owner, entry)),
        }
        Ok(())
    }

    /// Stops sharing the entry `key` if `owner` set it. Returns whether it was removed.
    pub fn remove_context(&mut self, owner: OwnerId, key: &str) -> bool {
        let before = self.context.len();
        self.context.retain(|(o, e)| !(*o == owner && e.key == key));
        let removed = self.context.len() != before;
        self.dirty |= removed;
        removed
    }

    /// The app state shared with the agent now, in the order it was first set.
    pub fn context(&self) -> Vec<ContextEntry> {
        self.context.iter().map(|(_, e)| e.clone()).collect()
    }

    fn remove_where(&mut self, mut doomed: impl FnMut(&RegisteredTool<H, V::Compiled>) -> bool) -> Vec<String> {
        let mut removed = Vec::new();
        self.tools.retain(|tool| {
            if doomed(tool) {
                removed.push(tool.def.spec.name.clone());
                false
            } else {
                true
            }
        });
        for name in &removed {
            self.events.push(RegistryEvent::Unregistered { name: name.clone() });
        }
        self.dirty |= !removed.is_empty();
        removed
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool<H, V::Compiled>> {
        self.tools.iter().find(|tool| tool.def.spec.name == name)
    }

    /// Every active tool, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool<H, V::Compiled>> {
        self.tools.iter()
    }

    /// How many tools are active.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is active.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The most recent refused registrations (at most 64), oldest first.
    pub fn refused(&self) -> &[RefusedTool] {
        &self.refused
    }

    /// Takes the events recorded since the last call.
    pub fn drain_events(&mut self) -> Vec<RegistryEvent> {
        std::mem::take(&mut self.events)
    }

    /// What the model sees: every active tool's spec, in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|tool| tool.def.spec.clone()).collect()
    }

    /// The revision of the last snapshot handed out (0 before the first).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Whether something changed since the last flush (it may still net out to nothing).
    pub fn has_pending_changes(&self) -> bool {
        self.dirty
    }

    /// The one snapshot to send for every change since the last flush, or `None` when the
    /// tool list and the app state are the same as the last ones sent (including changes that
    /// cancelled out).
    pub fn flush(&mut self) -> Option<ContextSnapshot> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let now = (self.specs(), self.context());
        if self.last_sent.as_ref() == Some(&now) {
            return None;
        }
        Some(self.snapshot(now))
    }

    /// A snapshot of the current list under a new revision, whether or not it changed: for a
    /// new or resumed connection, where the server must hear the whole list again.
    pub fn resync(&mut self) -> ContextSnapshot {
        self.dirty = false;
        let now = (self.specs(), self.context());
        self.snapshot(now)
    }

    fn snapshot(&mut self, now: (Vec<ToolSpec>, Vec<ContextEntry>)) -> ContextSnapshot {
        self.revision += 1;
        self.last_sent = Some(now.clone());
        let (tools, context) = now;
        ContextSnapshot { revision: self.revision, tools, context }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::{CompactValidator, NativeRegex};
    use serde_json::json;

    type Registry = ToolRegistry<&'static str, CompactValidator<NativeRegex>>;

    fn registry() -> Registry {
        ToolRegistry::new(CompactValidator::new(NativeRegex))
    }

    const PAGE: OwnerId = OwnerId(1);
    const CART: OwnerId = OwnerId(2);

    fn names(registry: &Registry) -> Vec<String> {
        registry.iter().map(|tool| tool.spec().name.clone()).collect()
    }

    #[test]
    fn registering_a_name_again_replaces_the_tool() {
        let mut registry = registry();
        assert_eq!(registry.register(PAGE, ToolDef::new("cart_add", "v1"), "first"), Ok(Registered::Added));
        assert_eq!(registry.register(CART, ToolDef::new("cart_add", "v2"), "second"), Ok(Registered::Replaced));
        assert_eq!(registry.len(), 1);
        let tool = registry.get("cart_add").unwrap();
        assert_eq!((tool.spec().description.as_str(), *tool.handler(), tool.owner()), ("v2", "second", CART));
    }

    #[test]
    fn unmount_removes_all_of_an_owners_tools_but_keeps_globals() {
        let mut registry = registry();
        registry.register(PAGE, ToolDef::new("product_view", ""), "h").unwrap();
        registry.register(PAGE, ToolDef::new("cart_add", ""), "h").unwrap();
        registry.register(PAGE, ToolDef::new("navigate", "").global(true), "h").unwrap();
        registry.register(CART, ToolDef::new("cart_view", ""), "h").unwrap();
        let mut removed = registry.unregister_owner(PAGE);
        removed.sort();
        assert_eq!(removed, ["cart_add", "product_view"]);
        assert_eq!(names(&registry), ["navigate", "cart_view"]);
    }

    #[test]
    fn a_replaced_tool_survives_the_unmount_of_its_previous_owner() {
        let mut registry = registry();
        registry.register(PAGE, ToolDef::new("search", ""), "old").unwrap();
        registry.register(CART, ToolDef::new("search", ""), "new").unwrap();
        assert!(registry.unregister_owner(PAGE).is_empty());
        assert!(!registry.unregister_owned(PAGE, "search"));
        assert_eq!(*registry.get("search").unwrap().handler(), "new");
    }

    #[test]
    fn the_tool_past_the_cap_is_refused_loudly() {
        let mut registry = registry();
        for n in 0..30 {
            registry.register(PAGE, ToolDef::new(format!("tool_{n}"), ""), "h").unwrap();
        }
        registry.drain_events();
        let error = registry.register(PAGE, ToolDef::new("tool_30", ""), "h").unwrap_err();
        assert_eq!(error, CoreError::ToolLimit { name: "tool_30".into(), cap: 30 });
        let events = registry.drain_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].name(), LIMIT_EVENT);
        assert_eq!(registry.len(), 30);
        assert_eq!(registry.refused()[0].name, "tool_30");
        // Replacing an existing name is not a new tool and is allowed at the cap.
        assert_eq!(registry.register(PAGE, ToolDef::new("tool_3", "new"), "h"), Ok(Registered::Replaced));
        // Freeing a place lets the next registration in, and forgets the refusal.
        registry.unregister("tool_0");
        registry.register(PAGE, ToolDef::new("tool_30", ""), "h").unwrap();
        assert!(registry.refused().is_empty());
    }

    #[test]
    fn lowering_the_cap_refuses_the_newest_tools() {
        let mut registry = registry();
        for n in 0..5 {
            registry.register(PAGE, ToolDef::new(format!("t{n}"), ""), "h").unwrap();
        }
        assert_eq!(registry.set_cap(3), ["t4", "t3"]);
        assert_eq!(names(&registry), ["t0", "t1", "t2"]);
        let limits = registry.drain_events().iter().filter(|e| e.name() == LIMIT_EVENT).count();
        assert_eq!(limits, 2);
    }

    #[test]
    fn invalid_names_and_schemas_are_refused_with_an_event() {
        let mut registry = registry();
        assert!(matches!(
            registry.register(PAGE, ToolDef::new("has space", ""), "h"),
            Err(CoreError::InvalidToolName { .. })
        ));
        assert!(matches!(registry.register(PAGE, ToolDef::new("", ""), "h"), Err(CoreError::InvalidToolName { .. })));
        assert!(registry.register(PAGE, ToolDef::new("x".repeat(65), ""), "h").is_err());
        let error = registry
            .register(PAGE, ToolDef::new("odd", "").parameters(json!({"if": {"type": "string"}})), "h")
            .unwrap_err();
        assert!(error.to_string().contains("tool \"odd\" refused"), "{error}");
        assert!(error.to_string().contains("\"if\""), "{error}");
        assert!(registry.is_empty());
        let events = registry.drain_events();
        assert_eq!(events.len(), 4);
        assert!(events.iter().all(|e| e.name() == "tool.registry.refused"));
    }

    #[test]
    fn any_number_of_changes_between_flushes_is_one_snapshot() {
        let mut registry = registry();
        assert_eq!(registry.flush(), None, "nothing changed yet");
        for n in 0..10 {
            registry.register(OwnerId(n), ToolDef::new(format!("t{n}"), ""), "h").unwrap();
        }
        let first = registry.flush().unwrap();
        assert_eq!((first.revision, first.tools.len()), (1, 10));
        assert_eq!(registry.flush(), None);
        registry.unregister_owner(OwnerId(3));
        registry.register(OwnerId(11), ToolDef::new("t11", ""), "h").unwrap();
        let second = registry.flush().unwrap();
        assert_eq!(second.revision, 2);
        assert_eq!(second.tools.len(), 10);
        // A change that cancels out sends nothing.
        registry.register(OwnerId(12), ToolDef::new("t12", ""), "h").unwrap();
        registry.unregister("t12");
        assert_eq!(registry.flush(), None);
        assert_eq!(registry.resync().revision, 3);
    }

    fn entry(key: &str, value: Value) -> ContextEntry {
        ContextEntry { key: key.into(), description: format!("the {key}"), value }
    }

    #[test]
    fn context_is_flushed_with_the_tools_and_leaves_with_its_owner() {
        let mut registry = registry();
        registry.register(PAGE, ToolDef::new("cart_add", "Add."), "add").unwrap();
        registry.set_context(CART, entry("cart", json!("empty"))).unwrap();
        registry.set_context(CART, entry("cart", json!("1 × Red mug"))).unwrap();
        registry.set_context(PAGE, entry("page", json!({"id": "home"}))).unwrap();
        let snapshot = registry.flush().expect("one snapshot for tools and context");
        assert_eq!(snapshot.tools.len(), 1);
        assert_eq!(snapshot.context, vec![entry("cart", json!("1 × Red mug")), entry("page", json!({"id": "home"}))]);
        // The same value again is no change; a new value is.
        registry.set_context(CART, entry("cart", json!("1 × Red mug"))).unwrap();
        assert_eq!(registry.flush(), None);
        // Only its owner removes an entry; unmounting the owner removes all of its entries.
        assert!(!registry.remove_context(PAGE, "cart"));
        registry.unregister_owner(CART);
        let snapshot = registry.flush().expect("the cart's entry left");
        assert_eq!(snapshot.context, vec![entry("page", json!({"id": "home"}))]);
        assert!(registry.remove_context(PAGE, "page"));
        assert_eq!(registry.flush().expect("a snapshot").context, vec![]);
    }

    #[test]
    fn context_over_its_limits_is_refused_loudly_and_no_stale_value_stays() {
        let mut registry = registry();
        registry.set_context(PAGE, entry("cart", json!("small"))).unwrap();
        registry.drain_events();
        let big = "x".repeat(MAX_CONTEXT_BYTES);
        let error = registry.set_context(PAGE, entry("cart", json!(big))).unwrap_err();
        assert!(error.to_string().contains("8 KiB of JSON together"), "{error}");
        let events = registry.drain_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].name(), CONTEXT_LIMIT_EVENT);
        assert_eq!(registry.context(), vec![], "the old value is not left for the agent to read");
        let error = registry.set_context(PAGE, entry("bad key", json!(1))).unwrap_err().to_string();
        assert!(error.contains("\"bad key\"") && error.contains("1 to 64 of A-Z"), "{error}");
        for n in 0..MAX_CONTEXT_ENTRIES {
            registry.set_context(PAGE, entry(&format!("k{n}"), json!(n))).unwrap();
        }
        let error = registry.set_context(PAGE, entry("one_more", json!(1))).unwrap_err();
        assert!(matches!(error, CoreError::ContextLimit { .. }), "{error}");
        assert_eq!(registry.context().len(), MAX_CONTEXT_ENTRIES);
    }

    #[test]
    fn resolver_tools_are_prefixed_and_tagged() {
        let mut registry = registry();
        let results = registry.register_resolver(
            CART,
            "cart",
            vec![(ToolDef::new("view", ""), "v"), (ToolDef::new("remove", "").risk(Risk::High), "r")],
        );
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(names(&registry), ["cart_view", "cart_remove"]);
        assert_eq!(registry.get("cart_remove").unwrap().resolver(), Some("cart"));
        assert_eq!(resolver_tool_name("cart_", "view"), "cart_view");
        assert_eq!(registry.unregister_owner(CART).len(), 2);
    }
}
