//! The built-in model: deterministic rules, clearly not an LLM. A [`ChatModel`] for
//! `tether serve --model scripted`, the tests and the examples, kept out of the agent library.
//!
//! It reads the user's last request and the tools the session has *now* (names, descriptions
//! and argument schemas — it never assumes a tool exists), picks the tool that fits, fills the
//! arguments from the request (enum values by word overlap, quantities, destinations, days) and
//! from earlier tool results, and answers once the goal tool has run. When the goal tool is not
//! on screen it uses a navigation tool first. It understands the storefront ("add the red mug to
//! my cart", "show my cart", "remove the mug", "check out", "go to the product page for …") and
//! the travel example ("book me the most comfortable seat to Mar del Plata on Friday"), and a
//! request to run a shell command ("run `ls -la`") through a tool that takes a `command` argument
//! (used to show declarative hooks end to end). Its whole contract is [`SCRIPTED_CONTRACT`],
//! which `tether serve --help` prints and the README quotes.

mod page;
mod replay;

pub use page::Page;
pub use replay::Replay;

use serde_json::{Map, Value};
use tether_protocol::{ResultStatus, ToolSpec};

use std::time::Duration;

use tether_agent::model::schema::normalize_schema;
use tether_agent::{
    AgentError, BoxFuture, CONTEXT_LABEL, ChatMessage, ChatModel, ChatRequest, DeltaSink, HOOK_LABEL, ModelReply,
    ModelToolCall, NoteKind, Streams, ToolCallDelta, partial_object,
};

/// Every answer of the built-in model starts with this, so nobody mistakes it for an LLM.
pub const SCRIPTED_PREFIX: &str = "(scripted model) ";

/// What the built-in model does, in the words `tether serve --help` prints and the README quotes
/// (a test keeps the two equal).
pub const SCRIPTED_CONTRACT: &str = "\
The built-in model (--model scripted) is a few deterministic rules, not an LLM; every answer
starts with \"(scripted model)\". For each message it:
 1. reads the intent from the leading verb (after \"please\", \"can you\"...): add/put,
    remove/delete, clear/empty, check out/place the order/pay; otherwise from words anywhere:
    show/view the cart, go to/open a page, book, find trains, run `a command`.
    \"add check out the library book\" is an add. Without any of these, a request that
    has every word of a tool's name calls it (\"show the size guide\": size_guide).
 2. picks the tool on the page now whose name (else description) has that verb, e.g.
    todo_add for \"add ...\"; if there is none, a navigation tool first (open_cart, or a
    navigate tool whose enum names the page). It never calls a tool the page does not have.
 3. fills the arguments:
    - a property with an enum (or oneOf/anyOf of consts, through local $refs as schemars
      writes a Rust enum): the value sharing the most words with the request; the only
      value when the request names none (\"remove it\"); when it names another (\"delete
      groceries\" with only \"call mom\" there) it answers that there is none such, and
      never takes the allowed value instead;
    - the tool's only required string without an enum: the request's words after the verb
      (\"add buy milk\" stores \"buy milk\"; quotes and a trailing \"to my list\" go);
    - numbers: a number in the request (\"two\", \"3\") for quantity/count/amount; else a
      number an earlier tool result gives after the property's name (\"Train 412\");
    - strings named destination/city/to: the words after \" to \"; date/day/when: a
      weekday, today, tomorrow or YYYY-MM-DD; query/search/text: the words after the verb
      (\"add buy milk\" → \"buy milk\"), or the whole request without a verb; a
      command property: the text in backticks;
    - anything else stays out (schema defaults apply).
    When a required argument cannot be filled it answers \"I need to know the <name> to
    use <tool>\" and says how to make it fillable (an enum of the allowed values, usually).
 4. calls the tool, then answers \"Done: <tool> returned ...\", or why it could not. A
    refusal that says to call it \"again with exactly these arguments: {...}\" (the user
    edited them in the approval dialog) makes it call the tool again with those.
A question (it ends with \"?\" or starts with what/which/how/is/are/does/do) that shares a
word with the description of app state the page shares (useAgentContext) is answered from
that state, without a tool: \"what is in my cart?\" gives
\"The shopping cart: 1 item (1 × Red mug), total $12.00\".
";

/// The deterministic built-in model (`--model scripted`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedModel {
    call_pace: Duration,
}

/// How many pieces the built-in model writes a tool call's arguments in.
const CALL_PIECES: usize = 6;

impl ScriptedModel {
    /// Writes each tool call's arguments in a few pieces `pace` apart (default: no pause), so
    /// that a demo or a test sees them arrive while the call is written (`tool_call_delta`
    /// events) before it runs.
    #[must_use]
    pub fn with_call_pace(mut self, pace: Duration) -> Self {
        self.call_pace = pace;
        self
    }
}

impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        "scripted (deterministic rules, not an LLM)"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_delta: DeltaSink<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        self.complete_streaming(request, Streams::text(on_delta))
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ChatRequest,
        streams: Streams<'a>,
    ) -> BoxFuture<'a, Result<ModelReply, AgentError>> {
        Box::pin(async move {
            let reply = respond(request);
            // Stream the answer a few words at a time, as a real model would.
            let words: Vec<&str> = reply.text.split_inclusive(' ').collect();
            for chunk in words.chunks(4) {
                (streams.text)(&chunk.concat());
            }
            // And the calls' arguments a few characters at a time.
            for (index, call) in reply.tool_calls.iter().enumerate() {
                let text = call.arguments.to_string();
                let chars: Vec<(usize, char)> = text.char_indices().collect();
                let step = chars.len().div_ceil(CALL_PIECES).max(1);
                for piece in (step..chars.len()).step_by(step).map(|at| chars[at].0).chain([text.len()]) {
                    if let Some(partial_args) = partial_object(&text[..piece]) {
                        (streams.tool_call)(ToolCallDelta { index, name: &call.name, partial_args });
                    }
                    if !self.call_pace.is_zero() {
                        tokio::time::sleep(self.call_pace).await;
                    }
                }
            }
            Ok(reply)
        })
    }
}

/// One tool call made since the request, with what the model read back.
struct Step<'a> {
    call: &'a ModelToolCall,
    result: Option<&'a str>,
    /// How the call ended, once it has a result.
    status: Option<ResultStatus>,
}

impl Step<'_> {
    fn failed(&self) -> bool {
        self.status.is_some_and(|status| !status.is_ok())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intent {
    Checkout,
    ClearCart,
    RemoveFromCart,
    AddToCart,
    ShowCart,
    ProductPage,
    GoHome,
    BookTrip,
    FindTrains,
    RunCommand,
    Unknown,
}

fn has(text: &str, words: &[&str]) -> bool {
    words.iter().any(|w| text.contains(w))
}

/// The shell command a request asks to run: the text in backticks of a request to run or
/// execute something, or what follows "run the command" / "execute the command".
fn command_in(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    if !has(&lower, &["run", "execute"]) {
        return None;
    }
    let command = if let Some(start) = text.find('`') {
        let rest = &text[start + 1..];
        rest[..rest.find('`')?].trim()
    } else {
        let at =
            ["run the command ", "execute the command "].iter().find_map(|m| lower.find(m).map(|at| at + m.len()))?;
        text[at..].trim()
    };
    (!command.is_empty()).then(|| command.to_string())
}

/// The argument of a tool that takes a shell command (`command`, `cmd`, `script`), if it has one.
fn command_property(tool: &ToolSpec) -> Option<&str> {
    let properties = tool.parameters.get("properties")?.as_object()?;
    properties
        .iter()
        .find(|(name, schema)| {
            matches!(name.to_lowercase().as_str(), "command" | "cmd" | "script" | "command_line" | "commandline")
                && schema.get("type").and_then(Value::as_str).is_none_or(|kind| kind == "string")
        })
        .map(|(name, _)| name.as_str())
}

/// Case-insensitive (ASCII) `strip_prefix`.
fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// The request without polite openers ("please", "can you", "I'd like to" ...).
fn without_openers(text: &str) -> &str {
    const OPENERS: [&str; 17] = [
        "please",
        "can you",
        "could you",
        "would you",
        "will you",
        "kindly",
        "i want to",
        "i'd like to",
        "i would like to",
        "let's",
        "lets",
        "now",
        "also",
        "then",
        "and",
        "just",
        "ok",
    ];
    let mut rest = text.trim_start();
    loop {
        let next = OPENERS.iter().find_map(|opener| {
            let after = strip_prefix_ci(rest, opener)?;
            after.starts_with([' ', ',']).then(|| after.trim_start_matches([' ', ',']))
        });
        match next {
            Some(after) => rest = after,
            None => return rest,
        }
    }
}

/// Verbs that name an intent when a request starts with them, longest first.
const LEADING_VERBS: [(&str, Intent); 12] = [
    ("place the order", Intent::Checkout),
    ("place my order", Intent::Checkout),
    ("check out", Intent::Checkout),
    ("checkout", Intent::Checkout),
    ("pay", Intent::Checkout),
    ("clear", Intent::ClearCart),
    ("empty", Intent::ClearCart),
    ("remove", Intent::RemoveFromCart),
    ("delete", Intent::RemoveFromCart),
    ("take out", Intent::RemoveFromCart),
    ("add", Intent::AddToCart),
    ("put", Intent::AddToCart),
];

/// The leading verb of a request (after openers), its intent, and the words after it.
fn leading_verb(text: &str) -> Option<(Intent, &str)> {
    let rest = without_openers(text);
    LEADING_VERBS.iter().find_map(|(verb, intent)| {
        let after = strip_prefix_ci(rest, verb)?;
        (after.is_empty() || after.starts_with([' ', ',', ':']))
            .then(|| (*intent, after.trim_start_matches([' ', ',', ':'])))
    })
}

fn intent_of(text: &str) -> Intent {
    let t = text.to_lowercase();
    if command_in(text).is_some() {
        Intent::RunCommand
    } else if let Some((intent, _)) = leading_verb(text) {
        // The verb the request starts with decides: "add check out the library book" is an add.
        intent
    } else if has(&t, &["check out", "checkout", "place the order", "place my order", "pay for"]) {
        Intent::Checkout
    } else if has(&t, &["clear", "empty"]) && t.contains("cart") {
        Intent::ClearCart
    } else if has(&t, &["remove", "delete", "take out", "take the"]) {
        Intent::RemoveFromCart
    } else if has(&t, &["add ", "put "]) {
        Intent::AddToCart
    } else if t.contains("book") && has(&t, &["seat", "ticket", "train", " to "]) {
        Intent::BookTrip
    } else if has(&t, &["train", "trains"]) {
        Intent::FindTrains
    } else if t.contains("cart") {
        Intent::ShowCart
    } else if has(&t, &["product page", "go to", "open", "show me", "look at"]) && !has(&t, &["home"]) {
        Intent::ProductPage
    } else if t.contains("home") {
        Intent::GoHome
    } else {
        Intent::Unknown
    }
}

/// Words too common to tie a question to a piece of app state.
const COMMON: [&str; 22] = [
    "the", "a", "an", "is", "are", "what", "which", "how", "in", "on", "of", "my", "me", "i", "do", "does", "this",
    "there", "much", "many", "page", "it",
];

/// The answer to a question from the app state the page shares (the `[app state]` message before
/// the request): the entry sharing the most words with the question, as `<description>: <value>`.
fn from_context(request: &str, before: &[ChatMessage]) -> Option<String> {
    let lower = request.trim().to_lowercase();
    let question = lower.ends_with('?')
        || ["what", "which", "how", "is ", "are ", "does ", "do "].iter().any(|w| lower.starts_with(w));
    if !question {
        return None;
    }
    let ChatMessage::Note { kind: NoteKind::AppState, content } = before.last()? else { return None };
    let entries = content.strip_prefix(CONTEXT_LABEL)?;
    let asked: Vec<String> = words(request).into_iter().filter(|w| !COMMON.contains(&w.as_str())).collect();
    entries
        .lines()
        .filter_map(|line| line.strip_prefix("- "))
        .filter_map(|line| {
            let (description, _) = line.split_once(": ")?;
            let shared = words(description).iter().filter(|w| asked.iter().any(|a| w.starts_with(a.as_str()))).count();
            (shared > 0).then_some((shared, line))
        })
        .fold(None, |best: Option<(usize, &str)>, (shared, line)| match best {
            Some((most, _)) if most >= shared => best,
            _ => Some((shared, line)),
        })
        .map(|(_, line)| line.to_string())
}

fn words(text: &str) -> Vec<String> {
    text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(String::from).collect()
}

/// How well a tool fits: every group in `must` needs one match in the name or description;
/// a tool whose name has a word of `avoid` is out.
fn tool_score(tool: &ToolSpec, must: &[&[&str]], prefer: &[&str], avoid: &[&str]) -> Option<usize> {
    let name = words(&tool.name.replace(['_', '-'], " "));
    let description = words(&tool.description);
    let in_name = |w: &str| name.iter().any(|n| n.starts_with(w));
    let in_description = |w: &str| description.iter().any(|d| d.starts_with(w));
    if avoid.iter().any(|w| in_name(w)) {
        return None;
    }
    let mut score = 0;
    for group in must {
        let best = group
            .iter()
            .map(|w| {
                if in_name(w) {
                    3
                } else if in_description(w) {
                    1
                } else {
                    0
                }
            })
            .max()
            .unwrap_or(0);
        if best == 0 {
            return None;
        }
        score += best;
    }
    score += prefer.iter().filter(|w| in_name(w) || in_description(w)).count();
    Some(score)
}

fn best_tool<'a>(tools: &'a [ToolSpec], must: &[&[&str]], prefer: &[&str], avoid: &[&str]) -> Option<&'a ToolSpec> {
    let mut best: Option<(&ToolSpec, usize)> = None;
    for tool in tools {
        if let Some(score) = tool_score(tool, must, prefer, avoid) {
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((tool, score));
            }
        }
    }
    best.map(|(tool, _)| tool)
}

/// The call a refusal asks for with the user's changed arguments: "call <tool> again with
/// exactly these arguments: {…}".
fn edited_call(result: &str) -> Option<(String, Value)> {
    const MARK: &str = " again with exactly these arguments: ";
    let at = result.find(MARK)?;
    let tool = result[..at].rsplit("call ").next()?.trim().to_string();
    let args = serde_json::Deserializer::from_str(&result[at + MARK.len()..]).into_iter::<Value>().next()?.ok()?;
    args.is_object().then_some((tool, args))
}

/// The tool of at least two words whose every word (`size_guide`: "size", "guide") the request
/// has, the one with the most words.
fn named_tool<'a>(request: &str, tools: &'a [ToolSpec]) -> Option<&'a ToolSpec> {
    let said = words(request);
    tools
        .iter()
        .filter_map(|tool| {
            let name = words(&tool.name.replace(['_', '-'], " "));
            (name.len() >= 2 && name.iter().all(|w| said.contains(w))).then_some((tool, name.len()))
        })
        .max_by_key(|(_, n)| *n)
        .map(|(tool, _)| tool)
}

/// The tool that achieves `intent`, if the session has one now.
fn goal_tool(intent: Intent, tools: &[ToolSpec]) -> Option<&ToolSpec> {
    match intent {
        Intent::Checkout => best_tool(tools, &[&["checkout", "order", "purchase"]], &["cart"], &["open", "navigate"]),
        Intent::ClearCart => best_tool(tools, &[&["clear", "empty"]], &["cart"], &[]),
        Intent::RemoveFromCart => best_tool(tools, &[&["remove", "delete"]], &["cart"], &[]),
        Intent::AddToCart => best_tool(tools, &[&["add"]], &["cart"], &[]),
        Intent::ShowCart => best_tool(
            tools,
            &[&["cart"], &["view", "show", "list", "contents", "see"]],
            &[],
            &["add", "remove", "clear", "open", "navigate", "checkout"],
        ),
        Intent::ProductPage => {
            best_tool(tools, &[&["product"], &["view", "open", "show", "page", "details"]], &[], &["add", "cart"])
        }
        Intent::GoHome => best_tool(tools, &[&["home"]], &["go", "open", "navigate"], &[]),
        Intent::BookTrip => best_tool(tools, &[&["book"]], &["ticket", "seat", "train"], &[]),
        Intent::FindTrains => best_tool(tools, &[&["train"], &["find", "list", "search"]], &[], &["book"]),
        Intent::RunCommand => {
            let shell_words = ["shell", "bash", "command", "execute", "terminal", "run"];
            tools
                .iter()
                .filter(|t| command_property(t).is_some())
                .min_by_key(|t| std::cmp::Reverse(tool_score(t, &[], &shell_words, &[]).unwrap_or(0)))
        }
        Intent::Unknown => None,
    }
}

/// Whether a tool of this name (whatever its description) would be the goal of `intent`.
fn is_goal_name(intent: Intent, name: &str) -> bool {
    let named = ToolSpec::new(name, String::new()).with_parameters(Value::Null);
    goal_tool(intent, std::slice::from_ref(&named)).is_some()
}

/// A tool that navigates to where the goal tool lives (the cart, for cart actions).
fn navigation_tool(intent: Intent, tools: &[ToolSpec]) -> Option<(&ToolSpec, Option<Value>)> {
    let target = match intent {
        Intent::Checkout | Intent::ClearCart | Intent::RemoveFromCart | Intent::ShowCart => "cart",
        Intent::ProductPage | Intent::AddToCart => "product",
        Intent::GoHome => "home",
        _ => return None,
    };
    if let Some(tool) = best_tool(tools, &[&["open", "go", "navigate"], &[target]], &[], &["add", "remove", "clear"]) {
        return Some((tool, None));
    }
    // A generic `navigate` tool: pick the enum value that names the target.
    let navigate = best_tool(tools, &[&["navigate", "go"]], &[], &[])?;
    let properties = navigate.parameters.get("properties")?.as_object()?;
    for (name, schema) in properties {
        if let Some(value) = options(schema).into_iter().find(|v| v.to_lowercase().contains(target)) {
            let mut args = Map::new();
            args.insert(name.clone(), Value::String(value));
            return Some((navigate, Some(Value::Object(args))));
        }
    }
    None
}

/// The string values a property allows: `enum`, `const`, or `oneOf`/`anyOf` of those (as
/// `Option<Enum>` derives: its `null` branch allows no string). Local `$ref`s are inlined before
/// (see [`normalized`]).
fn options(schema: &Value) -> Vec<String> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values.iter().filter_map(Value::as_str).map(String::from).collect();
    }
    if let Some(constant) = schema.get("const") {
        return constant.as_str().map(String::from).into_iter().collect();
    }
    ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_array))
        .flatten()
        .flat_map(options)
        .collect()
}

/// Whether a property's schema lists its values (an enum, a const, or branches of them).
fn lists_values(schema: &Value) -> bool {
    schema.get("enum").is_some()
        || schema.get("const").is_some()
        || ["oneOf", "anyOf"]
            .iter()
            .filter_map(|k| schema.get(*k).and_then(Value::as_array))
            .flatten()
            .any(|branch| branch.get("type").and_then(Value::as_str) != Some("null") && lists_values(branch))
}

/// The tool with its argument schema's local `$ref`s inlined (`#/$defs/Colour`, as schemars
/// writes a Rust enum), so that its enums are read where they are.
fn normalized(tool: &ToolSpec) -> ToolSpec {
    let mut tool = tool.clone();
    tool.parameters = normalize_schema(&tool.parameters);
    tool
}

/// Why an argument could not be filled.
#[derive(Debug, Clone, PartialEq)]
enum Unfilled {
    /// A required argument the request says nothing about.
    Missing(String),
    /// The request names a value (`named`) that the property does not allow now.
    NotAllowed { property: String, named: String, allowed: Vec<String> },
}

impl Unfilled {
    /// The property that could not be filled.
    fn property(&self) -> &str {
        match self {
            Self::Missing(property) | Self::NotAllowed { property, .. } => property,
        }
    }
}

/// Words that name no value: determiners, pronouns, numbers, politeness.
const NAMES_NOTHING: [&str; 24] = [
    "a", "an", "the", "my", "our", "your", "this", "that", "these", "those", "it", "them", "one", "ones", "some",
    "please", "all", "of", "too", "also", "again", "more", "another", "as",
];

/// The words of a tool's name and description ("todo_remove" → "todo", "remove", …).
fn own_words(tool: &ToolSpec) -> Vec<String> {
    let mut words_of = words(&tool.name.replace(['_', '-'], " "));
    words_of.extend(words(&tool.description));
    words_of
}

/// What the request names for a value, if anything: its words after the verb (a trailing "to my
/// list" gone) without the tool's own words, determiners, pronouns and numbers ("delete
/// groceries" → "groceries"; "remove it" → nothing).
fn named_value(tool: &ToolSpec, request_text: &str) -> Option<String> {
    let phrase = free_text(tool, request_text)?;
    let context = own_words(tool);
    let named: Vec<String> = words(&phrase)
        .into_iter()
        .filter(|w| {
            !NAMES_NOTHING.contains(&w.as_str())
                && !context.contains(w)
                && quantity_in(std::slice::from_ref(w)).is_none()
        })
        .collect();
    (!named.is_empty()).then_some(phrase)
}

/// The option sharing the most words with the request (ties go to the first); `None` if none shares any.
fn best_option(options: &[String], request: &[String]) -> Option<String> {
    let mut best: Option<(&String, usize)> = None;
    for option in options {
        let overlap =
            words(option).iter().filter(|w| request.iter().any(|r| r == *w || r.trim_end_matches('s') == *w)).count();
        if overlap > 0 && best.is_none_or(|(_, b)| overlap > b) {
            best = Some((option, overlap));
        }
    }
    best.map(|(option, _)| option.clone())
}

fn quantity_in(request: &[String]) -> Option<u64> {
    const NUMBERS: [&str; 10] = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];
    request.iter().find_map(|w| {
        w.parse::<u64>()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .or_else(|| NUMBERS.iter().position(|n| n == w).map(|n| n as u64 + 1))
    })
}

/// The words after `marker` up to " on ", a comma or the end: "to Mar del Plata on Friday" → "Mar del Plata".
fn phrase_after(text: &str, marker: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let start = lower.find(marker)? + marker.len();
    let rest = &text[start..];
    let end =
        [" on ", ",", ".", "?", "!", " for "].iter().filter_map(|stop| rest.find(stop)).min().unwrap_or(rest.len());
    let phrase = rest[..end].trim();
    (!phrase.is_empty()).then(|| phrase.to_string())
}

fn day_in(text: &str) -> Option<String> {
    const DAYS: [&str; 9] =
        ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow"];
    let request = words(text);
    if let Some(day) = request.iter().find(|w| DAYS.contains(&w.as_str())) {
        let mut chars = day.chars();
        return chars.next().map(|c| c.to_uppercase().collect::<String>() + chars.as_str());
    }
    text.split_whitespace().find(|w| w.len() == 10 && w.chars().filter(|c| *c == '-').count() == 2).map(String::from)
}

/// A number that earlier results give for a property: "Train 412" for `train`.
fn number_from_results(property: &str, steps: &[Step<'_>]) -> Option<u64> {
    let needle = property.to_lowercase();
    for step in steps {
        let Some(result) = step.result else { continue };
        let lower = result.to_lowercase();
        for (at, _) in lower.match_indices(&needle) {
            let digits: String =
                lower[at + needle.len()..].trim_start().chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                return Some(n);
            }
        }
    }
    None
}

/// The only required string property without allowed values, if the tool has exactly one.
fn lone_required_string(properties: &Map<String, Value>, required: &[String]) -> Option<String> {
    let mut strings = required.iter().filter(|name| {
        properties
            .get(name.as_str())
            .is_some_and(|schema| !lists_values(schema) && schema.get("type").and_then(Value::as_str) == Some("string"))
    });
    let first = strings.next()?;
    strings.next().is_none().then(|| first.clone())
}

/// What a free-text argument gets: the quoted text if there is one, else the request's words
/// after the leading verb, without a trailing "to my list" (where the item goes, when those
/// words name the tool or a list): "add buy milk to my list" → "buy milk".
fn free_text(tool: &ToolSpec, request_text: &str) -> Option<String> {
    let text = request_text.trim();
    for (open, close) in [('"', '"'), ('“', '”')] {
        if let Some(start) = text.find(open) {
            let rest = &text[start + open.len_utf8()..];
            if let Some(end) = rest.find(close) {
                let quoted = rest[..end].trim();
                if !quoted.is_empty() {
                    return Some(quoted.to_string());
                }
            }
        }
    }
    let after_verb = leading_verb(text).map_or_else(|| without_openers(text), |(_, rest)| rest);
    let mut phrase = after_verb.trim().trim_end_matches(['.', '!', '?']).trim_end();
    for polite in [", please", " please"] {
        if let Some(at) = phrase.len().checked_sub(polite.len()) {
            if phrase.is_char_boundary(at) && phrase[at..].eq_ignore_ascii_case(polite) {
                phrase = phrase[..at].trim_end();
            }
        }
    }
    let mut context = own_words(tool);
    context.extend(["list", "lists", "todo", "todos", "to", "do", "task", "tasks", "item", "items"].map(String::from));
    let lower = phrase.to_ascii_lowercase();
    let tail_at = [" to ", " on ", " onto ", " in ", " from ", " off "]
        .iter()
        .filter_map(|marker| lower.rfind(marker).map(|at| (at, at + marker.len())))
        .max_by_key(|(at, _)| *at);
    if let Some((at, tail_start)) = tail_at {
        let tail = words(&phrase[tail_start..]);
        let determiners = ["my", "the", "our", "your", "this"];
        let named: Vec<&String> = tail.iter().filter(|w| !determiners.contains(&w.as_str())).collect();
        let has_determiner = tail.first().is_some_and(|w| determiners.contains(&w.as_str()));
        if has_determiner && !named.is_empty() && named.len() <= 3 && named.iter().all(|w| context.contains(w)) {
            phrase = phrase[..at].trim_end();
        }
    }
    (!phrase.is_empty()).then(|| phrase.to_string())
}

/// The answer when an argument cannot be filled: a named value that is not allowed (nothing
/// else is taken in its place), or which argument is missing and how to make it fillable.
fn cannot_fill(tool: &ToolSpec, unfilled: &Unfilled) -> String {
    let missing = match unfilled {
        Unfilled::Missing(missing) => missing.as_str(),
        Unfilled::NotAllowed { property, named, allowed } => {
            let listed: Vec<String> = allowed.iter().take(8).map(|c| format!("\"{c}\"")).collect();
            let now = if listed.is_empty() {
                "nothing now (its enum is empty)".to_string()
            } else {
                format!("{} now", listed.join(", "))
            };
            return format!(
                "There is no \"{named}\" here: {}'s {property} can be {now}, so I did not use {}.",
                tool.name, tool.name
            );
        }
    };
    let tool = &normalized(tool);
    let schema = tool.parameters.get("properties").and_then(|p| p.get(missing)).cloned().unwrap_or(Value::Null);
    let choices = options(&schema);
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let hint = if !choices.is_empty() {
        let listed: Vec<String> = choices.iter().take(8).map(|c| format!("\"{c}\"")).collect();
        format!("Name one of its values: {}.", listed.join(", "))
    } else if schema.get("enum").is_some() {
        "Its enum is empty: there is nothing to choose from yet.".to_string()
    } else if kind == "integer" || kind == "number" {
        format!(
            "The built-in model fills a number only for a quantity/count/amount named in the request, or from an \
             earlier tool result that says \"{missing} 42\"; give `{missing}` an enum of the allowed values, or run an \
             LLM (tether serve --model URL)."
        )
    } else {
        format!(
            "The built-in model fills `{missing}` only from an enum of its allowed values (the one sharing the most \
             words with the request) or, as the tool's only required string, from the words after the verb; give it \
             an enum of the current values (a schema made from your state), or run an LLM (tether serve --model URL)."
        )
    };
    format!("I need to know the {missing} to use {}. {hint}", tool.name)
}

/// Fills a tool's arguments from the request and earlier results. `Err` names a required
/// argument that cannot be filled.
fn fill_args(tool: &ToolSpec, intent: Intent, request_text: &str, steps: &[Step<'_>]) -> Result<Value, Unfilled> {
    let tool = &normalized(tool);
    let request = words(request_text);
    let mut args = Map::new();
    let properties = tool.parameters.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
    let required: Vec<String> = tool
        .parameters
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).map(String::from).collect())
        .unwrap_or_default();
    let command = (intent == Intent::RunCommand).then(|| command_in(request_text)).flatten();
    let lone_string = lone_required_string(&properties, &required);
    let required_strings: Vec<&str> = required
        .iter()
        .filter(|r| {
            properties
                .get(r.as_str())
                .is_some_and(|p| p.get("type").and_then(Value::as_str) == Some("string") || lists_values(p))
        })
        .map(String::as_str)
        .collect();
    for (name, schema) in &properties {
        let lower = name.to_lowercase();
        if let Some(command) = command.as_ref().filter(|_| command_property(tool) == Some(name.as_str())) {
            args.insert(name.clone(), Value::String(command.clone()));
            continue;
        }
        let kind = schema.get("type").and_then(Value::as_str).unwrap_or("");
        let choices = options(schema);
        // Strings from a list (an enum of the page's state may be empty: nothing goes then).
        let from_list =
            !choices.is_empty() || (lists_values(schema) && !matches!(kind, "integer" | "number" | "boolean"));
        let value = if from_list {
            let comfortable = has(&request_text.to_lowercase(), &["comfortable", "best", "first class", "luxury"]);
            let wanted = if intent == Intent::BookTrip && comfortable && choices.iter().any(|c| c == "first") {
                Some("first".to_string())
            } else {
                best_option(&choices, &request)
            };
            match wanted {
                Some(wanted) => Some(Value::String(wanted)),
                // At most one value allowed, and the request names another: said so, never the
                // allowed one taken instead ("delete groceries" with only "call mom" there).
                None if choices.len() <= 1 => match named_value(tool, request_text) {
                    // The words name a value for this property (the only required string one).
                    Some(named) if required_strings == [name.as_str()] => {
                        return Err(Unfilled::NotAllowed { property: name.clone(), named, allowed: choices });
                    }
                    Some(_) => None,
                    // Nothing named ("remove it"): the only value there is.
                    None => choices.first().cloned().map(Value::String),
                },
                None => None,
            }
        } else if kind == "integer" || kind == "number" {
            if has(&lower, &["quantity", "qty", "count", "amount"]) {
                quantity_in(&request).map(Value::from)
            } else {
                number_from_results(name, steps).map(Value::from)
            }
        } else if kind == "string" {
            if has(&lower, &["destination", "city"]) || lower == "to" {
                phrase_after(request_text, " to ").map(Value::String)
            } else if has(&lower, &["date", "day", "when"]) {
                day_in(request_text).map(Value::String)
            } else if lone_string.as_deref() == Some(name.as_str()) {
                free_text(tool, request_text).map(Value::String)
            } else if has(&lower, &["query", "search", "text"]) {
                // The words after the verb ("delete ghost" → "ghost"), else the whole request.
                free_text(tool, request_text).or_else(|| Some(request_text.to_string())).map(Value::String)
            } else {
                None
            }
        } else {
            None
        };
        match value {
            Some(value) => {
                args.insert(name.clone(), value);
            }
            None if required.contains(name) => return Err(Unfilled::Missing(name.clone())),
            None => {}
        }
    }
    Ok(Value::Object(args))
}

/// After a refusal like "Book tourist instead.", the same call with that enum value.
fn retry_with_alternative(tool: &ToolSpec, call: &ModelToolCall, result: &str) -> Option<Value> {
    let lower = result.to_lowercase();
    let properties = tool.parameters.get("properties")?.as_object()?;
    for (name, schema) in properties {
        let current = call.arguments.get(name).and_then(Value::as_str);
        for option in options(schema) {
            if Some(option.as_str()) != current && lower.contains(&format!("{} instead", option.to_lowercase())) {
                let mut args = call.arguments.as_object().cloned().unwrap_or_default();
                args.insert(name.clone(), Value::String(option));
                return Some(Value::Object(args));
            }
        }
    }
    None
}

fn call(name: &str, arguments: Value, n: usize) -> ModelReply {
    ModelReply {
        text: String::new(),
        tool_calls: vec![ModelToolCall { id: format!("scripted_{n}").into(), name: name.to_string(), arguments }],
        ..ModelReply::default()
    }
}

fn answer(text: impl Into<String>) -> ModelReply {
    ModelReply { text: format!("{SCRIPTED_PREFIX}{}", text.into()), ..ModelReply::default() }
}

fn summary(result: &str) -> String {
    let text: String = result.chars().take(240).collect();
    if result.chars().count() > 240 { format!("{text}…") } else { text }
}

/// What a Stop hook asked for, if its feedback says the answer must end with a marker.
fn required_ending(feedback: &str) -> Option<String> {
    let lower = feedback.to_lowercase();
    let at = ["ends with", "end with", "ending with", "end your response with", "end your answer with"]
        .iter()
        .filter_map(|phrase| lower.find(phrase).map(|at| at + phrase.len()))
        .min()?;
    let rest = feedback[at..].trim_start();
    let marker = if let Some(quote) = rest.chars().next().filter(|c| matches!(c, '"' | '`' | '\'')) {
        rest[1..].split(quote).next()?.to_string()
    } else {
        // Unquoted: the rest of the line, up to the end of the sentence.
        let line = rest.lines().next()?;
        let end = ["? ", ". ", "! ", ", ", "; "].iter().filter_map(|stop| line.find(stop)).min().unwrap_or(line.len());
        line[..end].trim_end().trim_end_matches(['.', ',', '?', '!', ';']).trim_end().to_string()
    };
    (!marker.is_empty()).then_some(marker)
}

/// The hook context inside a judge prompt: the first JSON object with `hook_event_name`, and
/// where it lies in the prompt.
fn hook_context(prompt: &str) -> Option<(Value, std::ops::Range<usize>)> {
    if !prompt.contains("\"hook_event_name\"") {
        return None;
    }
    prompt.match_indices('{').find_map(|(start, _)| {
        let mut values = serde_json::Deserializer::from_str(&prompt[start..]).into_iter::<Value>();
        let value = values.next()?.ok()?;
        let end = start + values.byte_offset();
        value.get("hook_event_name").is_some().then_some((value, start..end))
    })
}

/// A judge's verdict when the built-in model serves a prompt hook (`$ARGUMENTS` holds the context).
fn judge(prompt: &str) -> Option<ModelReply> {
    let (context, span) = hook_context(prompt)?;
    // The instructions are the prompt around the context (before and after `$ARGUMENTS`).
    let instructions = format!("{}\n{}", &prompt[..span.start], &prompt[span.end..]);
    let verdict = match (required_ending(&instructions), context.get("final_output").and_then(Value::as_str)) {
        (Some(marker), Some(output)) if !output.trim_end().ends_with(&marker) => {
            serde_json::json!({"ok": false, "reason": format!("The answer must end with \"{marker}\".")})
        }
        _ => serde_json::json!({"ok": true}),
    };
    Some(ModelReply { text: verdict.to_string(), ..ModelReply::default() })
}

fn respond(request: &ChatRequest) -> ModelReply {
    let messages = &request.messages;
    let Some(request_at) = messages.iter().rposition(ChatMessage::is_users_own) else {
        return answer("Hello! Ask me to do something with the tools on this page.");
    };
    let ChatMessage::User { content: request_text } = &messages[request_at] else { unreachable!() };
    if let Some(verdict) = judge(request_text) {
        return verdict;
    }

    // A Stop hook rejected the last answer: fix it as asked.
    if let Some(ChatMessage::Note { kind: NoteKind::Hook, content: feedback }) =
        messages.last().filter(|_| messages.len() > request_at + 1)
    {
        if feedback.starts_with(HOOK_LABEL) {
            let last_answer = messages[..messages.len() - 1].iter().rev().find_map(|m| match m {
                ChatMessage::Assistant { content, tool_calls } if tool_calls.is_empty() => Some(content.as_str()),
                _ => None,
            });
            if let (Some(marker), Some(previous)) = (required_ending(feedback), last_answer) {
                let text = previous.strip_prefix(SCRIPTED_PREFIX).unwrap_or(previous);
                return answer(format!("{} {marker}", text.trim_end()));
            }
        }
    }

    let mut steps = Vec::new();
    for message in &messages[request_at + 1..] {
        match message {
            ChatMessage::Assistant { tool_calls, .. } => {
                steps.extend(tool_calls.iter().map(|call| Step { call, result: None, status: None }));
            }
            ChatMessage::Tool { call_id, content, status, .. } => {
                if let Some(step) = steps.iter_mut().rev().find(|s| &s.call.id == call_id) {
                    step.result = Some(content.as_str());
                    step.status = Some(*status);
                }
            }
            _ => {}
        }
    }
    let n = steps.len();
    let tools = &request.tools;
    // The user changed a call's arguments in the approval dialog: the tool again, with them.
    if let Some((tool, args)) = steps.last().and_then(|s| s.result).and_then(edited_call) {
        let made = steps.iter().any(|s| s.call.name == tool && s.call.arguments == args);
        if !made && tools.iter().any(|t| t.name == tool) {
            return call(&tool, args, n);
        }
    }
    if n == 0 {
        if let Some(found) = from_context(request_text, &messages[..request_at]) {
            return answer(found);
        }
    }
    let intent = intent_of(request_text);

    // Travel: find the trains first when booking needs a train number nobody gave.
    if intent == Intent::BookTrip {
        let book = goal_tool(Intent::BookTrip, tools);
        let find = goal_tool(Intent::FindTrains, tools);
        let searched = steps.iter().any(|s| find.is_some_and(|f| f.name == s.call.name));
        if let (Some(book), Some(find), false) = (book, find, searched) {
            if fill_args(book, intent, request_text, &steps).is_err() {
                return match fill_args(find, Intent::FindTrains, request_text, &steps) {
                    Ok(args) => call(&find.name, args, n),
                    Err(unfilled) => answer(format!("To look for trains I need the {}.", unfilled.property())),
                };
            }
        }
    }

    let goal = goal_tool(intent, tools);
    // The goal tool may have left the page when it ran (checkout navigates away): its call in
    // this run still counts.
    let goal_name = goal.map(|g| g.name.clone()).or_else(|| {
        steps
            .iter()
            .rev()
            .find(|s| s.result.is_some() && is_goal_name(intent, &s.call.name))
            .map(|s| s.call.name.clone())
    });
    if let Some(goal_name) = goal_name {
        let goal_steps: Vec<&Step<'_>> = steps.iter().filter(|s| s.call.name == goal_name).collect();
        if let Some(last) = goal_steps.last() {
            let result = last.result.unwrap_or("");
            if last.failed() && goal_steps.len() < 3 {
                if let Some(args) = goal.and_then(|goal| retry_with_alternative(goal, last.call, result)) {
                    return call(&goal_name, args, n);
                }
            }
            return if last.failed() {
                answer(format!("I could not complete {goal_name}: {}", summary(result)))
            } else {
                answer(format!("Done: {goal_name} returned {}", summary(result)))
            };
        }
    }
    if let Some(goal) = goal {
        return match fill_args(goal, intent, request_text, &steps) {
            Ok(args) => call(&goal.name, args, n),
            Err(unfilled) => answer(cannot_fill(goal, &unfilled)),
        };
    }
    if let Some((navigation, args)) = navigation_tool(intent, tools) {
        let already = steps.iter().any(|s| s.call.name == navigation.name);
        if !already {
            let args = match args {
                Some(args) => args,
                None => {
                    fill_args(navigation, intent, request_text, &steps).unwrap_or_else(|_| Value::Object(Map::new()))
                }
            };
            return call(&navigation.name, args, n);
        }
    }
    if intent == Intent::Unknown {
        // A request that names a tool ("show the size guide" for `size_guide`).
        if let Some(named) = named_tool(request_text, tools) {
            if let Some(done) = steps.iter().rev().find(|s| s.call.name == named.name && s.result.is_some()) {
                let result = done.result.unwrap_or_default();
                return if done.failed() {
                    answer(format!("I could not complete {}: {}", named.name, summary(result)))
                } else {
                    answer(format!("Done: {} returned {}", named.name, summary(result)))
                };
            }
            return match fill_args(named, intent, request_text, &steps) {
                Ok(args) => call(&named.name, args, n),
                Err(unfilled) => answer(cannot_fill(named, &unfilled)),
            };
        }
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        return answer(format!(
            "I only understand simple requests about the tools on this page. Available now: {}.",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ));
    }
    answer("There is no tool on this page for that. Try navigating first.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_request_naming_a_tool_calls_it_then_says_what_it_returned() {
        let tools = vec![
            tool("product_view", "Show this product's details.", json!({"type": "object"})),
            tool("size_guide", "Show the size guide in the chat.", json!({"type": "object"})),
        ];
        let first = respond(&ChatRequest {
            messages: vec![user("show the size guide")],
            tools: tools.clone(),
            ..ChatRequest::default()
        });
        assert_eq!(first.tool_calls[0].name, "size_guide");
        let messages = vec![
            user("show the size guide"),
            ChatMessage::Assistant { content: String::new(), tool_calls: first.tool_calls.clone() },
            ChatMessage::tool(first.tool_calls[0].id.clone(), "size_guide", ResultStatus::Ok, "S 48 cm"),
        ];
        let second = respond(&ChatRequest { messages, tools: tools.clone(), ..ChatRequest::default() });
        assert!(second.tool_calls.is_empty());
        assert_eq!(second.text, format!("{SCRIPTED_PREFIX}Done: size_guide returned S 48 cm"));
        // Only with every word of the name: "show the guide" names nothing.
        let vague = respond(&ChatRequest { messages: vec![user("show the guide")], tools, ..ChatRequest::default() });
        assert!(vague.tool_calls.is_empty(), "{vague:?}");
    }

    #[test]
    fn a_refusal_with_the_users_arguments_makes_the_same_call_again_with_them() {
        let tools = vec![tool(
            "cart_remove",
            "Remove a product from the cart.",
            json!({"type": "object", "properties": {"productId": {"enum": ["mug-red", "mug-blue"]}}}),
        )];
        let first = respond(&ChatRequest {
            messages: vec![user("remove the red mug")],
            tools: tools.clone(),
            ..ChatRequest::default()
        });
        assert_eq!(first.tool_calls[0].arguments, json!({"productId": "mug-red"}));
        let refusal = "[denied] The user rejected the call to \"cart_remove\": the user changed the arguments before approving; call cart_remove again with exactly these arguments: {\"productId\":\"mug-blue\"}";
        let mut messages = vec![
            user("remove the red mug"),
            ChatMessage::Assistant { content: String::new(), tool_calls: first.tool_calls.clone() },
            ChatMessage::tool(first.tool_calls[0].id.clone(), "cart_remove", ResultStatus::Denied, refusal),
        ];
        let again =
            respond(&ChatRequest { messages: messages.clone(), tools: tools.clone(), ..ChatRequest::default() });
        assert_eq!(again.tool_calls[0].name, "cart_remove");
        assert_eq!(again.tool_calls[0].arguments, json!({"productId": "mug-blue"}));
        messages.push(ChatMessage::Assistant { content: String::new(), tool_calls: again.tool_calls.clone() });
        messages.push(ChatMessage::tool(
            again.tool_calls[0].id.clone(),
            "cart_remove",
            ResultStatus::Ok,
            "removed Blue mug",
        ));
        let done = respond(&ChatRequest { messages, tools, ..ChatRequest::default() });
        assert_eq!(done.text, format!("{SCRIPTED_PREFIX}Done: cart_remove returned removed Blue mug"));
    }

    fn tool(name: &str, description: &str, parameters: Value) -> ToolSpec {
        ToolSpec::new(name, description).with_parameters(parameters)
    }

    fn storefront_home() -> Vec<ToolSpec> {
        let ids = json!({"type": "string", "enum": ["mug-red", "mug-blue", "tee-black"]});
        vec![
            tool(
                "product_view",
                "Open a product's page.",
                json!({"type": "object", "properties": {"productId": ids}, "required": ["productId"]}),
            ),
            tool(
                "cart_add",
                "Add a product to the shopping cart.",
                json!({"type": "object", "properties": {"productId": ids, "quantity": {"type": "integer", "minimum": 1, "default": 1}}, "required": ["productId"]}),
            ),
            tool("open_cart", "Open the cart page.", json!({"type": "object"})),
        ]
    }

    fn user(text: &str) -> ChatMessage {
        ChatMessage::User { content: text.into() }
    }

    fn first_call(reply: &ModelReply) -> (&str, &Value) {
        let call = reply.tool_calls.first().unwrap_or_else(|| panic!("no call: {reply:?}"));
        (call.name.as_str(), &call.arguments)
    }

    #[test]
    fn adds_the_product_named_in_words() {
        let reply = respond(&ChatRequest {
            messages: vec![user("add the red mug to my cart")],
            tools: storefront_home(),
            ..ChatRequest::default()
        });
        assert_eq!(first_call(&reply), ("cart_add", &json!({"productId": "mug-red"})));
        let reply = respond(&ChatRequest {
            messages: vec![user("Add two blue mugs to the cart")],
            tools: storefront_home(),
            ..ChatRequest::default()
        });
        assert_eq!(first_call(&reply), ("cart_add", &json!({"productId": "mug-blue", "quantity": 2})));
    }

    fn todo_tools(items: &[&str]) -> Vec<ToolSpec> {
        vec![
            tool(
                "todo_add",
                "Add an item to the to-do list.",
                json!({"type": "object", "properties": {"title": {"type": "string", "minLength": 1}}, "required": ["title"]}),
            ),
            tool(
                "todo_remove",
                "Remove an item from the to-do list.",
                json!({"type": "object", "properties": {"title": {"type": "string", "enum": items}}, "required": ["title"]}),
            ),
        ]
    }

    fn ask(text: &str, tools: Vec<ToolSpec>) -> ModelReply {
        respond(&ChatRequest { messages: vec![user(text)], tools, ..ChatRequest::default() })
    }

    /// A notes board as a Leptos app derives it: the colour an enum behind a `$ref` (each
    /// variant with a doc comment: `oneOf` of `const`s), the border an `Option` of it.
    fn notes_board() -> Vec<ToolSpec> {
        let colour = json!({"oneOf": [{"const": "yellow", "description": "Yellow paper."}, {"const": "pink", "description": "Pink paper."}]});
        vec![tool(
            "note_colour",
            "Change the colour of the board's notes.",
            json!({
                "type": "object",
                "properties": {
                    "colour": {"$ref": "#/$defs/Colour"},
                    "border": {"anyOf": [{"$ref": "#/$defs/Colour"}, {"type": "null"}]}
                },
                "required": ["colour"],
                "$defs": {"Colour": colour}
            }),
        )]
    }

    #[test]
    fn an_enum_behind_a_ref_is_read_where_it_is() {
        let reply = ask("set the note colour to pink", notes_board());
        assert_eq!(first_call(&reply), ("note_colour", &json!({"colour": "pink", "border": "pink"})));
        let reply = ask("note colour: yellow", notes_board());
        assert_eq!(first_call(&reply).1["colour"], json!("yellow"));
    }

    #[test]
    fn a_named_value_that_is_not_allowed_is_said_so_and_nothing_else_is_taken() {
        // Only "call mom" is on the list: "delete groceries" must not remove it.
        for request in ["delete groceries", "Remove groceries from my list."] {
            let reply = ask(request, todo_tools(&["call mom"]));
            assert!(reply.tool_calls.is_empty(), "{request}: {reply:?}");
            assert!(reply.text.contains("There is no \"groceries\""), "{request}: {}", reply.text);
            assert!(reply.text.contains("\"call mom\""), "{}", reply.text);
        }
        // Nothing named: the only value there is.
        let reply = ask("remove it", todo_tools(&["call mom"]));
        assert_eq!(first_call(&reply), ("todo_remove", &json!({"title": "call mom"})));
        // The list is empty: nothing to remove, nothing made up.
        let reply = ask("delete ghost", todo_tools(&[]));
        assert!(reply.tool_calls.is_empty(), "{reply:?}");
        assert!(reply.text.contains("There is no \"ghost\""), "{}", reply.text);
        // A name that matches is taken, as before.
        let reply = ask("remove call mom", todo_tools(&["call mom", "buy milk"]));
        assert_eq!(first_call(&reply), ("todo_remove", &json!({"title": "call mom"})));
    }

    #[test]
    fn a_text_property_gets_the_words_after_the_verb() {
        // Not required, so not the lone required string: the `text` rule fills it.
        let tools = vec![tool(
            "note_add",
            "Add a note to the board.",
            json!({"type": "object", "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}}}),
        )];
        let reply = ask("add buy milk", tools);
        assert_eq!(first_call(&reply), ("note_add", &json!({"text": "buy milk"})));
    }

    #[test]
    fn a_lone_required_string_gets_the_words_after_the_verb() {
        for (text, title) in [
            ("add buy milk", "buy milk"),
            ("Add Buy milk", "Buy milk"),
            ("please add buy milk to my list.", "buy milk"),
            ("can you add call mom to the to-do list, please", "call mom"),
            ("add \"buy milk\" to my list", "buy milk"),
            // "the bank" is not where the item goes: it stays.
            ("add go to the bank", "go to the bank"),
        ] {
            assert_eq!(first_call(&ask(text, todo_tools(&[]))), ("todo_add", &json!({"title": title})), "{text}");
        }
    }

    #[test]
    fn the_leading_verb_decides_the_intent() {
        let mut tools = todo_tools(&[]);
        tools.push(tool("checkout", "Place the order and pay for everything in the cart.", json!({"type": "object"})));
        let reply = ask("add check out the library book", tools.clone());
        assert_eq!(first_call(&reply), ("todo_add", &json!({"title": "check out the library book"})));
        let reply = ask("please remove the milk", todo_tools(&["buy milk", "buy bread"]));
        assert_eq!(first_call(&reply), ("todo_remove", &json!({"title": "buy milk"})));
        // Without a leading verb, words anywhere still count.
        assert_eq!(first_call(&ask("could you check out", tools)).0, "checkout");
    }

    #[test]
    fn an_argument_it_cannot_fill_is_named_with_how_to_make_it_fillable() {
        let remove_by_id = tool(
            "todo_remove",
            "Remove an item from the to-do list.",
            json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
        );
        let reply = ask("remove buy milk", vec![remove_by_id]);
        assert!(reply.tool_calls.is_empty(), "{reply:?}");
        assert!(reply.text.contains("I need to know the id to use todo_remove."), "{}", reply.text);
        assert!(reply.text.contains("enum"), "{}", reply.text);
        let two_strings = tool(
            "note_add",
            "Add a note.",
            json!({"type": "object", "properties": {"title": {"type": "string"}, "body": {"type": "string"}}, "required": ["title", "body"]}),
        );
        let reply = ask("add buy milk", vec![two_strings]);
        assert!(reply.text.contains("I need to know the body to use note_add."), "{}", reply.text);
        assert!(reply.text.contains("enum of the current values"), "{}", reply.text);
        let reply = ask("remove the car", todo_tools(&["buy milk", "call mom"]));
        assert!(reply.text.contains("Name one of its values: \"buy milk\", \"call mom\"."), "{}", reply.text);
        let reply = ask("remove buy milk", todo_tools(&[]));
        assert!(reply.text.contains("enum is empty"), "{}", reply.text);
    }

    #[test]
    fn navigates_first_when_the_goal_tool_is_not_on_screen() {
        let reply = respond(&ChatRequest {
            messages: vec![user("remove the mug")],
            tools: storefront_home(),
            ..ChatRequest::default()
        });
        assert_eq!(first_call(&reply).0, "open_cart");
        let reply = respond(&ChatRequest {
            messages: vec![user("go to the product page for the black tee")],
            tools: storefront_home(),
            ..ChatRequest::default()
        });
        assert_eq!(first_call(&reply), ("product_view", &json!({"productId": "tee-black"})));
    }

    #[test]
    fn never_calls_a_tool_the_session_does_not_have() {
        for text in
            ["check out", "show my cart", "remove the mug", "clear my cart", "book a train to Rosario on Monday"]
        {
            let reply = respond(&ChatRequest { messages: vec![user(text)], tools: vec![], ..ChatRequest::default() });
            assert!(reply.tool_calls.is_empty(), "{text}: {reply:?}");
            assert!(reply.text.starts_with(SCRIPTED_PREFIX));
        }
    }

    #[test]
    fn answers_after_the_goal_tool_ran_and_reports_refusals() {
        let tools = storefront_home();
        let messages = vec![
            user("add the red mug to my cart"),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ModelToolCall { id: "c1".into(), name: "cart_add".into(), arguments: json!({}) }],
            },
            ChatMessage::tool("c1", "cart_add", ResultStatus::Ok, "{\"count\":1}"),
        ];
        let reply =
            respond(&ChatRequest { messages: messages.clone(), tools: tools.clone(), ..ChatRequest::default() });
        assert!(reply.tool_calls.is_empty());
        assert!(reply.text.contains("Done: cart_add"), "{}", reply.text);
        let mut refused = messages;
        refused[2] = ChatMessage::tool("c1", "cart_add", ResultStatus::Denied, "[denied] The user rejected the call");
        let reply = respond(&ChatRequest { messages: refused, tools, ..ChatRequest::default() });
        assert!(reply.text.contains("could not complete cart_add"), "{}", reply.text);
    }

    #[test]
    fn books_first_class_then_follows_the_policy_hint() {
        let tools = vec![
            tool(
                "find_trains",
                "List the trains to a destination on a date, with the fare for each class.",
                json!({"type": "object", "properties": {"to": {"type": "string"}, "date": {"type": "string"}}, "required": ["to", "date"]}),
            ),
            tool(
                "book_ticket",
                "Book one seat on a train for the employee who is asking.",
                json!({"type": "object", "properties": {"train": {"type": "integer"}, "seat_class": {"type": "string", "enum": ["first", "tourist"]}}, "required": ["train", "seat_class"]}),
            ),
        ];
        let mut messages = vec![user("Book me the most comfortable seat to Mar del Plata on Friday.")];
        let reply =
            respond(&ChatRequest { messages: messages.clone(), tools: tools.clone(), ..ChatRequest::default() });
        assert_eq!(first_call(&reply), ("find_trains", &json!({"to": "Mar del Plata", "date": "Friday"})));
        messages.push(ChatMessage::Assistant { content: String::new(), tool_calls: reply.tool_calls.clone() });
        messages.push(ChatMessage::tool(
            reply.tool_calls[0].id.clone(),
            "find_trains",
            ResultStatus::Ok,
            "Train 412 dep 08:10, first 95000 ARS; Train 418 dep 17:30",
        ));
        let reply =
            respond(&ChatRequest { messages: messages.clone(), tools: tools.clone(), ..ChatRequest::default() });
        assert_eq!(first_call(&reply), ("book_ticket", &json!({"train": 412, "seat_class": "first"})));
        messages.push(ChatMessage::Assistant { content: String::new(), tool_calls: reply.tool_calls.clone() });
        messages.push(ChatMessage::tool(
            reply.tool_calls[0].id.clone(),
            "book_ticket",
            ResultStatus::Denied,
            "[denied] Blocked by policy: first class needs a manager's approval. Book tourist instead.",
        ));
        let reply = respond(&ChatRequest { messages, tools, ..ChatRequest::default() });
        assert_eq!(first_call(&reply), ("book_ticket", &json!({"train": 412, "seat_class": "tourist"})));
    }

    #[test]
    fn a_goal_tool_that_navigated_away_still_counts() {
        // `checkout` ran and left the cart page: the model answers instead of going back.
        let tools = vec![tool("open_cart", "Open the cart page.", json!({"type": "object"}))];
        let messages = vec![
            user("check out"),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ModelToolCall { id: "c1".into(), name: "checkout".into(), arguments: json!({}) }],
            },
            ChatMessage::tool("c1", "checkout", ResultStatus::Ok, "{\"order\":\"T-1001\"}"),
        ];
        let reply = respond(&ChatRequest { messages, tools, ..ChatRequest::default() });
        assert!(reply.tool_calls.is_empty(), "{reply:?}");
        assert!(reply.text.contains("Done: checkout"), "{}", reply.text);
    }

    #[test]
    fn fixes_its_answer_when_a_stop_hook_asks_for_a_marker() {
        let messages = vec![
            user("hello"),
            ChatMessage::Assistant { content: format!("{SCRIPTED_PREFIX}Hi there."), tool_calls: vec![] },
            ChatMessage::note(
                NoteKind::Hook,
                "[hook Stop agent[0] rejected the answer] The answer must end with \"[DONE]\".",
            ),
        ];
        let reply = respond(&ChatRequest { messages, tools: vec![], ..ChatRequest::default() });
        assert_eq!(reply.text, format!("{SCRIPTED_PREFIX}Hi there. [DONE]"));
    }

    #[test]
    fn runs_a_shell_command_only_through_a_tool_that_takes_one() {
        let shell = tool(
            "ExecuteShellCommand",
            "Runs a shell command.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        );
        let mut tools = storefront_home();
        tools.push(shell);
        let reply = respond(&ChatRequest {
            messages: vec![user("please run `sudo rm -rf /tmp/x`")],
            tools,
            ..ChatRequest::default()
        });
        assert_eq!(first_call(&reply), ("ExecuteShellCommand", &json!({"command": "sudo rm -rf /tmp/x"})));
        let reply = respond(&ChatRequest {
            messages: vec![user("execute the command ls -la")],
            tools: vec![tool(
                "Bash",
                "Bash.",
                json!({"type": "object", "properties": {"command": {"type": "string"}}}),
            )],
            ..ChatRequest::default()
        });
        assert_eq!(first_call(&reply), ("Bash", &json!({"command": "ls -la"})));
        // No tool takes a command: nothing is called, whatever the names say.
        let reply = respond(&ChatRequest {
            messages: vec![user("run `ls`")],
            tools: storefront_home(),
            ..ChatRequest::default()
        });
        assert!(reply.tool_calls.is_empty(), "{reply:?}");
    }

    #[test]
    fn reads_required_endings_quoted_or_not() {
        assert_eq!(required_ending("End your response with 'Task complete.'").as_deref(), Some("Task complete."));
        assert_eq!(required_ending("It must end with `[DONE]`, always").as_deref(), Some("[DONE]"));
        assert_eq!(
            required_ending("Does it end with === RESPONSE COMPLETE ===?\nIf yes: ok").as_deref(),
            Some("=== RESPONSE COMPLETE ===")
        );
        assert_eq!(required_ending("Answers must end with [DONE]. Be brief.").as_deref(), Some("[DONE]"));
        assert_eq!(required_ending("Be brief."), None);
    }

    #[test]
    fn judges_with_the_context_in_the_middle_of_the_prompt() {
        let context = json!({"agent_name": "a", "final_output": "4", "hook_event_name": "Stop"});
        let prompt = format!(
            "Check the agent response below.\n\n{context}\n\nDoes it end with === RESPONSE COMPLETE ===?\nIf yes: {{\"ok\": true}}"
        );
        let reply = respond(&ChatRequest { messages: vec![user(&prompt)], tools: vec![], ..ChatRequest::default() });
        let verdict: Value = serde_json::from_str(&reply.text).unwrap();
        assert_eq!(verdict["ok"], false);
        assert!(verdict["reason"].as_str().unwrap().contains("=== RESPONSE COMPLETE ==="), "{verdict}");
    }

    #[test]
    fn judges_prompt_hooks_about_a_required_ending() {
        let prompt = "Reject the answer unless it ends with \"[DONE]\".\n{\"hook_event_name\":\"Stop\",\"final_output\":\"All set\"}";
        let reply = respond(&ChatRequest { messages: vec![user(prompt)], tools: vec![], ..ChatRequest::default() });
        let verdict: Value = serde_json::from_str(&reply.text).unwrap();
        assert_eq!(verdict["ok"], false);
        let prompt = prompt.replace("All set", "All set [DONE]");
        let reply = respond(&ChatRequest { messages: vec![user(&prompt)], tools: vec![], ..ChatRequest::default() });
        assert_eq!(serde_json::from_str::<Value>(&reply.text).unwrap(), json!({"ok": true}));
    }
}
