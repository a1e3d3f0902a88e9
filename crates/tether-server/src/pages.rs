//! Tools on other pages: what each page of a session offered, so that a call of a tool the page
//! the user is on does not offer (or offers for other values) can be made where it is.
//!
//! Tether's model sees the tools on screen, and a page's tools only allow what that page shows:
//! on a product's page `cart_add` takes only that product. Asked there for another product, a
//! model that sees only that tool either substitutes the product it may add (the worst outcome: a
//! wrong action) or gives up. The session remembers the tools each page offered, by the URL the
//! page reported in its `CONTEXT_UPDATE` ([`PageMemory::record`]); the model is offered one tool
//! per name, its allowed values widened with those other pages allowed
//! ([`PageMemory::widen`], [`PageMemory::elsewhere`]); and a call that the page the user is on
//! refuses but another page accepts ([`PageMemory::page_for`]) is made there: the server asks the
//! page to open that URL (the `navigate` run event), waits for its `CONTEXT_UPDATE`, and sends the
//! `TOOL_CALL` (`Session::open_page`). What the page does is validated there again, so a memory
//! that went stale can refuse a call, never change it.
//!
//! The memory is the session's, in this process: it is not stored, so after a restart or a
//! hand-off to another server it starts again with the next page the user opens.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tether_core::validate::{CompiledSchema, FullSchema};
use tether_protocol::ToolSpec;

/// Most pages remembered per session (the least recently seen goes first).
pub(crate) const MAX_PAGES: usize = 16;

/// Most tools of other pages offered besides the page's own.
pub(crate) const MAX_ELSEWHERE: usize = 16;

/// What one page offered when it was last seen.
#[derive(Clone)]
struct PageTools {
    url: String,
    tools: Vec<ToolSpec>,
    schemas: HashMap<String, Arc<FullSchema>>,
}

/// The tools of the pages a session has seen, most recently seen last.
#[derive(Clone, Default)]
pub(crate) struct PageMemory {
    pages: Vec<PageTools>,
}

impl PageMemory {
    /// Records what the page at `url` offers now (its compiled schemas by tool name).
    pub(crate) fn record(&mut self, url: &str, tools: &[ToolSpec], schemas: &HashMap<String, Arc<FullSchema>>) {
        self.pages.retain(|page| page.url != url);
        if self.pages.len() >= MAX_PAGES {
            self.pages.remove(0);
        }
        self.pages.push(PageTools { url: url.to_string(), tools: tools.to_vec(), schemas: schemas.clone() });
    }

    /// The other pages (not `here`), most recently seen first.
    fn others<'a>(&'a self, here: Option<&'a str>) -> impl Iterator<Item = &'a PageTools> + 'a {
        self.pages.iter().rev().filter(move |page| Some(page.url.as_str()) != here)
    }

    /// `spec` (a tool of the page at `here`) with the values other pages' versions of it allow
    /// added to its arguments' `enum`s, after its own.
    pub(crate) fn widen(&self, here: Option<&str>, spec: &mut ToolSpec) {
        for page in self.others(here) {
            if let Some(other) = page.tools.iter().find(|tool| tool.name == spec.name) {
                widen_enums(&mut spec.parameters, &other.parameters);
            }
        }
    }

    /// The tools other pages offered that are not among `taken` (the names the model is offered
    /// already), each once: the most recently seen page's version, widened with the others'.
    /// At most [`MAX_ELSEWHERE`].
    pub(crate) fn elsewhere(&self, here: Option<&str>, taken: &[String]) -> Vec<ToolSpec> {
        let mut out: Vec<ToolSpec> = Vec::new();
        for page in self.others(here) {
            for tool in &page.tools {
                if tool.global || taken.contains(&tool.name) {
                    continue;
                }
                if let Some(known) = out.iter_mut().find(|t| t.name == tool.name) {
                    widen_enums(&mut known.parameters, &tool.parameters);
                } else if out.len() < MAX_ELSEWHERE {
                    out.push(tool.clone());
                }
            }
        }
        out
    }

    /// The most recently seen other page whose tool `name` accepts `args`.
    pub(crate) fn page_for(&self, here: Option<&str>, name: &str, args: &Value) -> Option<String> {
        self.others(here)
            .find(|page| page.schemas.get(name).is_some_and(|schema| schema.is_valid(args)))
            .map(|page| page.url.clone())
    }

    /// Why the most recently seen other page that offered `name` refuses `args` (its
    /// validation errors), when no page offers it now.
    pub(crate) fn refusal(&self, here: Option<&str>, name: &str, args: &Value) -> Option<String> {
        let page = self.others(here).find(|page| page.schemas.contains_key(name))?;
        let errors = page.schemas[name].errors(args);
        Some(tether_core::validate::format_validation_errors(name, &errors))
    }
}

/// Adds to each top-level property of `schema` that has an `enum` the values `other`'s same
/// property allows and it does not.
fn widen_enums(schema: &mut Value, other: &Value) {
    let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return };
    for (name, prop) in props.iter_mut() {
        let more = other.pointer(&format!("/properties/{}/enum", escape(name))).and_then(Value::as_array);
        let (Some(values), Some(more)) = (prop.get_mut("enum").and_then(Value::as_array_mut), more) else { continue };
        for value in more {
            if !values.contains(value) {
                values.push(value.clone());
            }
        }
    }
}

/// A property name as one JSON pointer segment.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tether_core::validate::{FullValidator, Validator};

    fn tool(name: &str, ids: &[&str]) -> ToolSpec {
        ToolSpec::new(name, "Add a product to the cart.").with_parameters(json!({"type": "object", "properties": {"productId": {"type": "string", "enum": ids}}, "required": ["productId"]}))
    }

    fn record(memory: &mut PageMemory, url: &str, tools: &[ToolSpec]) {
        let schemas =
            tools.iter().map(|t| (t.name.clone(), Arc::new(FullValidator.compile(&t.parameters).unwrap()))).collect();
        memory.record(url, tools, &schemas);
    }

    #[test]
    fn a_tool_is_offered_with_the_values_other_pages_allowed_and_made_where_they_are() {
        let mut memory = PageMemory::default();
        record(&mut memory, "/", &[tool("cart_add", &["mug-red", "poster-space"]), tool("product_view", &["mug-red"])]);
        record(&mut memory, "/product/mug-red", &[tool("cart_add", &["mug-red"])]);
        let here = Some("/product/mug-red");
        let mut add = tool("cart_add", &["mug-red"]);
        memory.widen(here, &mut add);
        assert_eq!(add.parameters["properties"]["productId"]["enum"], json!(["mug-red", "poster-space"]));
        // A tool only another page has is offered; one the model has already is not repeated.
        let elsewhere = memory.elsewhere(here, &["cart_add".to_string()]);
        assert_eq!(elsewhere.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["product_view"]);
        assert_eq!(memory.page_for(here, "cart_add", &json!({"productId": "poster-space"})).as_deref(), Some("/"));
        // The page the user is on is never "elsewhere"; values no page allows go nowhere.
        assert_eq!(memory.page_for(Some("/"), "cart_add", &json!({"productId": "poster-space"})), None);
        assert_eq!(memory.page_for(here, "cart_add", &json!({"productId": "tee-black"})), None);
        let why = memory.refusal(here, "product_view", &json!({"productId": "tee-black"})).unwrap();
        assert!(why.starts_with("Validation args \"product_view\": "), "{why}");
    }

    #[test]
    fn a_page_seen_again_replaces_what_it_offered_and_the_oldest_page_goes_first() {
        let mut memory = PageMemory::default();
        record(&mut memory, "/", &[tool("cart_add", &["mug-red"])]);
        record(&mut memory, "/", &[tool("cart_add", &["mug-blue"])]);
        assert_eq!(memory.page_for(None, "cart_add", &json!({"productId": "mug-red"})), None);
        for n in 0..MAX_PAGES {
            record(&mut memory, &format!("/p{n}"), &[]);
        }
        assert_eq!(memory.page_for(None, "cart_add", &json!({"productId": "mug-blue"})), None, "forgotten");
        assert_eq!(memory.pages.len(), MAX_PAGES);
    }
}
