//! A question changes nothing: before a run, the model says whether the user's message asks for
//! a change or only for information; a question's run is offered only the tools that change
//! nothing (which the model also says, once per tool), so a model cannot act on a question.
//!
//! A request's calls are checked too: before a call that changes something runs, the model is
//! asked, alone, whether the message asked for what the tool does, and the call is refused
//! when the probability of its "yes" is below a threshold ([`QuestionCheck::fit`]). Measured
//! with the 1.5B model, it answers "yes" to every such question, but the *probability* of its
//! "yes" separates most calls that do something else (adding a product when asked to remove
//! one) from those asked for.
//!
//! The message's kind and each tool's effect are asked of the model itself, each as a small request of its own with a constrained
//! one-word answer: measured with the 1.5B model, it tells a question from a request far more
//! reliably when asked that alone (27 of 29 messages, the two misses follow-ups it took for
//! questions) than when it must choose between answering and calling a tool in the same reply
//! (where it added a mug when asked "If I added one more blue mug, what would my cart total
//! be?"). The kind is read from the message alone: quoting the answer before it made requests
//! after a refusal read as questions ([`kind_prompt`]). Nothing in it depends on an app: the
//! message, the last answer, each tool's own name and description.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde_json::{Value, json};
use tether_protocol::{Risk, ToolSpec};

use crate::model::{ChatMessage, ChatModel, ChatRequest};

/// What a user's message asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// Only information: the run is offered only the tools that change nothing.
    Question,
    /// Something done (or the model could not tell): every tool is offered.
    Request,
}

/// The most tool effects kept; past it the memory starts again (a server sees few distinct tools).
const MAX_REMEMBERED: usize = 4096;

/// Asks the model what a message asks for and which tools change nothing, remembering each
/// tool's answer by its name and description (shared by every session of an [`AgentLoop`]).
///
/// [`AgentLoop`]: crate::AgentLoop
#[derive(Debug, Default)]
pub struct QuestionCheck {
    /// Whether a tool only reads or shows, by name and description.
    read_only: Mutex<HashMap<(String, String), bool>>,
}

/// The answer a one-word question is held to: `{"<key>": <one of values>}` (`kind` of a message,
/// `effect` of a tool).
fn choice_schema(key: &str, values: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": {key: {"type": "string", "enum": values}},
        "required": [key],
        "additionalProperties": false
    })
}

/// At most `most` characters of `text` (what a question quotes of a message, an answer or a
/// description).
fn cut(text: &str, most: usize) -> String {
    text.chars().take(most).collect()
}

/// The line that quotes the agent's answer before the message, when there is one (a short reply
/// may pick from it), for the questions about a message.
fn answer_before(last_answer: Option<&str>) -> String {
    last_answer.map(|answer| format!("Your last message: \"{}\"\n", cut(answer, 300))).unwrap_or_default()
}

/// The question about a message, alone: quoting the answer before it pulled requests towards
/// "question" (measured with the 1.5B model, `bench/tasks/kind_probes.py`: "Empty my cart."
/// after a refusal scored 0.51 for "question" with the answer before and 0.09 without; 29 of 32
/// messages right with it, 31 without, short replies such as "Both." and "The second one."
/// included). The words "what your last message offered" stay although that message is no longer
/// quoted: they are the wording measured.
pub(crate) fn kind_prompt(message: &str) -> String {
    format!(
        "The user's message: \"{}\"\n\nIs it a request to do something in the app (add, remove, change, open, \
         order… — a short reply that picks or confirms what your last message offered counts), or only a question \
         asking for information? Reply {{\"kind\": \"request\"}} or {{\"kind\": \"question\"}}.",
        cut(message, 600)
    )
}

/// The question about a tool.
pub(crate) fn effect_prompt(tool: &ToolSpec) -> String {
    format!(
        "Tool: {}: {}\n\nDoes calling this tool change the user's data (add, remove, buy, book, save, set), or does \
         it only read or show something (look up, open a page, list)? Reply {{\"effect\": \"changes data\"}} or \
         {{\"effect\": \"only reads or shows\"}}.",
        tool.name,
        cut(&tool.description, 400)
    )
}

/// The question whether a message asks for what a tool does (only the tool's description: the
/// 1.5B model tells fitting from unfitting calls better without the arguments).
pub(crate) fn fit_prompt(message: &str, last_answer: Option<&str>, tool: &ToolSpec) -> String {
    let before = answer_before(last_answer);
    let action = if tool.description.trim().is_empty() { tool.name.as_str() } else { tool.description.as_str() };
    format!(
        "{before}Message: \"{}\"\nAction: {}\n\nDid the message ask for this action? Answer yes or no.",
        cut(message, 600),
        cut(action, 400)
    )
}

/// The question that lists the separate actions a message asks for ([`QuestionCheck::actions`]).
pub(crate) fn actions_prompt(message: &str, last_answer: Option<&str>) -> String {
    let before = answer_before(last_answer);
    format!(
        "{before}The user's message: \"{}\"\n\nList the separate actions the message asks the app to do, each as a \
         short instruction in the message's own words. A question that only asks for information asks for no \
         action. Reply {{\"actions\": [...]}}.",
        cut(message, 600)
    )
}

/// The question that asks for the arithmetic that answers `message` from `data` (what the app
/// shows) ([`QuestionCheck::arithmetic`]).
pub(crate) fn arithmetic_prompt(data: &str, message: &str) -> String {
    format!(
        "What the app shows:\n{}\n\nThe user's message: \"{}\"\n\nWrite the arithmetic that answers the message \
         from the numbers the app shows, as one expression of numbers with + - * / and brackets. Reply \
         {{\"expression\": \"...\"}}.",
        cut(data, 4000),
        cut(message, 600)
    )
}

/// The most actions [`QuestionCheck::actions`] reads from one answer.
const MOST_ACTIONS: usize = 8;

/// The actions the model listed for `message` ([`actions_prompt`]) that are the message's own:
/// when one of them shares a word with the message, those that share none are left out (the
/// answer before's: "open home page" listed for "I'd like two space posters, please." after
/// "The home page has been opened."); when none does, the message is a reply ("Yes, both
/// please.") and all of them are its.
pub(crate) fn message_actions<'a>(message: &str, listed: &'a [String]) -> Vec<&'a String> {
    let said = crate::claims::content_stems(message);
    let shares = |action: &&String| crate::claims::content_stems(action).iter().any(|stem| said.contains(stem));
    let own: Vec<&String> = listed.iter().filter(shares).collect();
    if own.is_empty() { listed.iter().collect() } else { own }
}

/// The letters that label a multiple-choice question's options.
const LETTERS: [&str; 10] = ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"];

/// The most actions one multiple-choice question lists (the letters, less "None of these").
pub(crate) const MOST_RIVALS: usize = LETTERS.len() - 1;

/// The multiple-choice question over the actions a message may ask for: each tool's
/// description (its name when it has none), then "None of these"; after the answer before the
/// message when `last_answer` is given.
pub(crate) fn rival_prompt(message: &str, last_answer: Option<&str>, tools: &[&ToolSpec]) -> String {
    let mut lines = String::new();
    for (letter, tool) in LETTERS.iter().zip(tools) {
        let action = if tool.description.trim().is_empty() { tool.name.as_str() } else { tool.description.trim() };
        lines.push_str(&format!("{letter}) {}\n", cut(action, 200)));
    }
    lines.push_str(&format!("{}) None of these\n", LETTERS[tools.len().min(MOST_RIVALS)]));
    let before = answer_before(last_answer);
    format!(
        "{before}Message: \"{}\"\n\nWhich of these actions does the message ask for?\n{lines}Answer with the letter.",
        cut(message, 600)
    )
}

/// The question whether a message asks for one value of a call's argument
/// ([`QuestionCheck::value`]).
pub(crate) fn value_prompt(message: &str, last_answer: Option<&str>, argument: &str, value: &str) -> String {
    let before = answer_before(last_answer);
    format!(
        "{before}Message: \"{}\"\n\nDoes the message ask for {} \"{}\"? Answer yes or no.",
        cut(message, 600),
        cut(argument, 60),
        cut(value, 100)
    )
}

/// The done question about an answer written in a run that changed nothing
/// ([`AgentLoop::with_done_check`](crate::AgentLoop::with_done_check)): whether it says that what
/// the message asks for was done, whatever its words.
pub(crate) fn done_prompt(message: &str, answer: &str) -> String {
    format!(
        "Message: \"{}\"\nAnswer: \"{}\"\n\nDoes the answer say that what the message asks for was done? Answer yes or no.",
        cut(message, 600),
        cut(answer, 600)
    )
}

/// The most allowed values of one argument the value check asks about (one request each).
pub const MOST_VALUES: usize = 8;

/// At or above this probability of "yes", the value called is taken as asked for and the other
/// values are not asked about (measured: a value the message does not ask for scored at most
/// 0.19 when the message named another, 0.34 when it named none).
pub const VALUE_SURE: f64 = 0.4;
/// Below this probability of "yes", a value is not one the message asks for, whatever the
/// others score ([`judge_values`]).
const VALUE_FLOOR: f64 = 0.15;
/// Below this, the only value an argument allows is not one the message asks for (the tool
/// cannot do what was asked here), and when every allowed value scores under it the message asks
/// for none of them ("Open my cart." for `cart_add`: 0.18-0.23 for each of four products, in the
/// task benchmark; a value asked for without being named scored at least 0.26, and the best of
/// an argument's values at least 0.30).
const ONLY_VALUE_FLOOR: f64 = 0.25;
/// Another allowed value this many times likelier than the one called is what the message asks
/// for instead. Measured: values the message did not ask for were beaten 1.6 to 2.7 times, and
/// values it asked for without naming them 1.2 to 2.3 times (a "large" T-shirt's `L` by `M`
/// 1.4 in the task benchmark; "as fast as possible" 1.9): 2 refuses few of the second.
const VALUE_RATIO: f64 = 2.0;

/// The value called and the best other one within this ratio of each other, the value called
/// under [`VALUE_SURE`]: the value question cannot tell them apart ([`ValueVerdict::Undecided`]).
/// Measured with the 1.5B model (`bench/tasks/value_probes.py`, 29 messages of 7 kinds of
/// choice): messages that make no choice gave the two likeliest values 1.04-1.23 times apart
/// ("Book the cheapest seat …": first 0.28, tourist 0.30); of those that make one in other
/// words, one scored its values under 1.25 apart with the value asked for under
/// [`VALUE_SURE`] ("I'm freezing.": heat 0.24, cool 0.22), and the nearest others 1.35 ("an
/// economy seat": tourist 0.31, first 0.23).
pub const VALUE_TIE: f64 = 1.25;

/// What the value check concluded about the value a call gave an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueVerdict {
    /// The message may ask for it: the call goes on.
    Fits,
    /// The value question scores the value called and another alike ([`VALUE_TIE`]), neither
    /// surely: the message may make no choice, and the model guessed.
    Undecided,
    /// The message asks rather for the allowed value at this index.
    Other(usize),
    /// The message does not ask for it (and for none of the others either, as far as the model
    /// can tell).
    NotAsked,
}

/// Whether `message` names `value` itself: every word of the value (split at anything not a
/// letter or digit: `mug-red` is "mug" and "red") is a word of the message, case aside. Such a
/// value is not asked about ([`AgentLoop::with_value_check`](crate::AgentLoop::with_value_check)).
pub fn names_value(message: &str, value: &str) -> bool {
    let said = crate::claims::plain_words(message);
    let value = crate::claims::plain_words(value);
    !value.is_empty() && value.iter().all(|word| said.contains(word))
}

/// The words of a tool's name: split at anything not a letter or digit and where a lowercase
/// letter meets an uppercase one (`archive_email`, `archiveEmail`: "archive", "email").
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut last_lower = false;
    for c in name.chars() {
        if (!c.is_alphanumeric() || (c.is_uppercase() && last_lower)) && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        last_lower = c.is_lowercase();
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Whether `message` names the tool `tool` itself: a word of its name that the name of no other
/// tool in `others` has (`archive` of `archive_email` beside `delete_email`; not `cart` of
/// `cart_add` beside `cart_remove`) is a word of the message or two of its words written as one
/// ("check out" for `checkout`), or begins one when it has four letters or more ("archived").
/// Such a call is not asked about by the fit check
/// ([`AgentLoop::with_fit_check`](crate::AgentLoop::with_fit_check)): the 1.5B model gave "Archive
/// Carla's message." and `archive_email` ("Move an email out of the inbox into the archive.") 0.73,
/// under the threshold.
pub fn names_tool(message: &str, tool: &str, others: &[&str]) -> bool {
    let mut said = crate::claims::plain_words(message);
    let joined: Vec<String> = said.windows(2).map(|pair| pair.concat()).collect();
    said.extend(joined);
    let own = distinctive_words(tool, others);
    said.iter().any(|word| names_word(word, &own))
}

/// The words of `tool`'s name that the name of no other tool in `others` has.
fn distinctive_words(tool: &str, others: &[&str]) -> Vec<String> {
    let taken: Vec<String> =
        others.iter().filter(|other| **other != tool).flat_map(|other| name_words(other)).collect();
    name_words(tool).into_iter().filter(|word| !taken.contains(word)).collect()
}

/// Whether a word of a message is one of `own` (a tool's [`distinctive_words`]), or begins
/// with one of four letters or more ("archived").
fn names_word(word: &str, own: &[String]) -> bool {
    own.iter().any(|w| w == word || (w.chars().count() >= 4 && word.starts_with(w.as_str())))
}

/// The part of `message` that asks for `tool` when the message names it and another of
/// `others` ([`names_tool`]'s words): from the first word that names `tool` to the next word that
/// names another tool. "Delete the invoice and archive the slides email." is "archive the slides
/// email." for `archive_email` and "Delete the invoice and" for `delete_email`, so the value
/// check reads each call's value in its own part of the message. `None` when the message does
/// not name `tool` and another tool apart.
pub(crate) fn part_for_tool<'m>(message: &'m str, tool: &str, others: &[&str]) -> Option<&'m str> {
    // Each word, with where it starts.
    let mut words: Vec<(usize, String)> = Vec::new();
    let mut start = None;
    for (at, c) in message.char_indices().chain(std::iter::once((message.len(), ' '))) {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(at),
            (false, Some(from)) => {
                words.push((from, message[from..at].to_lowercase()));
                start = None;
            }
            _ => {}
        }
    }
    let own = distinctive_words(tool, others);
    let first = words.iter().position(|(_, word)| names_word(word, &own))?;
    let theirs: Vec<String> =
        others.iter().filter(|other| **other != tool).flat_map(|other| distinctive_words(other, others)).collect();
    let other_named = |(_, word): &(usize, String)| names_word(word, &theirs) && !names_word(word, &own);
    if !words.iter().any(other_named) {
        return None;
    }
    let end = words[first + 1..].iter().find(|w| other_named(w)).map_or(message.len(), |(at, _)| *at);
    Some(message[words[first].0..end].trim_end())
}

/// The verdict on the value at `called`, from each allowed value's probability of "yes"
/// ([`QuestionCheck::value`]). Measured with the 1.5B model on 28 message/value pairs from 7
/// apps (docs/models.md): a value the message names scores 0.26-0.90, one it does not
/// 0.09-0.19 when it is the only one allowed ("Buy me a black T-shirt." for `productId:
/// "mug-red"`), and a value another one outscores by 2 times or more was not asked for in
/// every pair but one (the model's own guess for "It's too warm in here."). When no allowed value
/// scores 0.25, the message asks for none of them.
pub fn judge_values(yes: &[f64], called: usize) -> ValueVerdict {
    let Some(&own) = yes.get(called) else { return ValueVerdict::Fits };
    if own >= VALUE_SURE {
        return ValueVerdict::Fits;
    }
    let best = yes.iter().enumerate().filter(|(at, _)| *at != called).max_by(|a, b| a.1.total_cmp(b.1));
    // The best any allowed value scored: under the floor (the only one allowed, or all of
    // them), none is asked for.
    let top = best.map_or(own, |(_, &other)| own.max(other));
    match best {
        Some((at, &other)) if other >= VALUE_RATIO * own => ValueVerdict::Other(at),
        _ if own < VALUE_FLOOR || top < ONLY_VALUE_FLOOR => ValueVerdict::NotAsked,
        Some((_, &other)) if own.max(other) < VALUE_TIE * own.min(other) => ValueVerdict::Undecided,
        _ => ValueVerdict::Fits,
    }
}

/// What the multiple-choice question preferred to the tool called ([`QuestionCheck::rival`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rival {
    /// The tool the message seems to ask for instead; `None`: none of the actions offered.
    pub tool: Option<String>,
    /// How many times likelier that answer is than the tool called.
    pub ratio: f64,
    /// How many times likelier "None of these" is than the tool called (the no-action check).
    pub none: f64,
}

/// Another action that fits the message better than the tool called ([`QuestionCheck::better_fit`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BetterFit {
    /// The tool whose action fits best, among the others asked about.
    pub tool: String,
    /// Its probability of "yes" to the fit question.
    pub probability: f64,
    /// How many times likelier "no" is for the tool called than for this one.
    pub ratio: f64,
}

/// What the fit question concluded about a call ([`QuestionCheck::fit`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// The probability of "yes": the higher of the message alone and after the answer before it.
    pub probability: f64,
    /// Whether the message alone reached the threshold (it did not need the answer before it).
    pub alone: bool,
}

/// The value of `key` in a one-word answer: the JSON object's, or the first of `words` the text
/// names (a model that does not constrain its replies may write a sentence).
fn read_word<'w>(text: &str, key: &str, words: &[&'w str]) -> Option<&'w str> {
    let text = text.trim();
    let from_json = crate::model::json_values(text)
        .into_iter()
        .find_map(|value| value.get(key).and_then(Value::as_str).map(str::to_ascii_lowercase));
    let lower = from_json.unwrap_or_else(|| text.to_ascii_lowercase());
    words.iter().filter_map(|word| lower.find(word).map(|at| (at, *word))).min().map(|(_, word)| word)
}

impl QuestionCheck {
    /// A check that remembers nothing yet.
    pub fn new() -> Self {
        QuestionCheck::default()
    }

    async fn ask(model: &dyn ChatModel, prompt: String, schema: &Value) -> Result<String, crate::AgentError> {
        let request = ChatRequest {
            messages: vec![ChatMessage::User { content: prompt }],
            tools: Vec::new(),
            ..ChatRequest::default()
        };
        let ignore = |_: &str| {};
        let reply = model.complete_json(&request, schema, &ignore).await?;
        Ok(if reply.text.trim().is_empty() { reply.raw } else { reply.text })
    }

    /// What `message` asks for, read from the message alone ([`kind_prompt`]). A model that fails
    /// or answers something else makes it a [`MessageKind::Request`]: every tool is offered, as
    /// without the check.
    pub async fn kind(&self, model: &dyn ChatModel, message: &str) -> MessageKind {
        match Self::ask(model, kind_prompt(message), &choice_schema("kind", &["request", "question"])).await {
            Ok(text) => match read_word(&text, "kind", &["question", "request"]) {
                Some("question") => MessageKind::Question,
                Some(_) => MessageKind::Request,
                None => {
                    tracing::warn!(reply = %text, "the model did not say whether the message is a question; every tool is offered");
                    MessageKind::Request
                }
            },
            Err(error) => {
                tracing::warn!(%error, "could not ask whether the message is a question; every tool is offered");
                MessageKind::Request
            }
        }
    }

    /// How many separate actions `message` asks for, `last_answer` being the agent's answer
    /// before it: the model lists them, each in a few words, under a schema (measured with the
    /// 1.5B model: "Add 2 T-shirts and a mug, and check out." → 3, "Buy me a large black
    /// T-shirt as well." → 1, "Yes, go ahead." after "Shall I place the order?" → 1), and the
    /// actions it took from the answer before are left out ([`message_actions`]). `None` when
    /// the model fails, answers something else or lists none (nothing is concluded).
    pub async fn actions(&self, model: &dyn ChatModel, message: &str, last_answer: Option<&str>) -> Option<usize> {
        let schema = json!({
            "type": "object",
            "properties": {"actions": {"type": "array", "items": {"type": "string"}, "maxItems": MOST_ACTIONS}},
            "required": ["actions"],
            "additionalProperties": false
        });
        match Self::ask(model, actions_prompt(message, last_answer), &schema).await {
            Ok(text) => {
                let listed = crate::model::json_values(&text).into_iter().find_map(|value| {
                    value.get("actions").and_then(Value::as_array).map(|actions| {
                        let listed: Vec<String> = actions
                            .iter()
                            .filter_map(Value::as_str)
                            .filter(|action| !action.trim().is_empty())
                            .map(str::to_string)
                            .collect();
                        message_actions(message, &listed).len()
                    })
                });
                if listed.is_none_or(|count| count == 0) {
                    tracing::warn!(reply = %text, "the model listed no action the message asks for");
                }
                listed.filter(|count| *count > 0)
            }
            Err(error) => {
                tracing::warn!(%error, "could not ask how many actions the message asks for");
                None
            }
        }
    }

    /// The arithmetic that answers `message` from `data` (what the app shows), as the model
    /// writes it under a schema ([`arithmetic_prompt`]): measured with the 1.5B model, `15 * 3`
    /// for "How much would three space posters cost altogether?" with the poster at $15.00,
    /// `24 + 12` for the cart's total if a $12.00 mug were added. `None` when the model fails or
    /// writes nothing.
    pub async fn arithmetic(&self, model: &dyn ChatModel, data: &str, message: &str) -> Option<String> {
        let schema = json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "maxLength": 200}},
            "required": ["expression"],
            "additionalProperties": false
        });
        match Self::ask(model, arithmetic_prompt(data, message), &schema).await {
            Ok(text) => crate::model::json_values(&text)
                .into_iter()
                .find_map(|value| value.get("expression").and_then(Value::as_str).map(str::to_string))
                .filter(|expression| !expression.trim().is_empty()),
            Err(error) => {
                tracing::warn!(%error, "could not ask for the arithmetic of the answer");
                None
            }
        }
    }

    /// The names of the tools among `tools` that change nothing. Only `none`-risk tools can be
    /// (a tool that notifies or asks for approval declares an effect); each is asked about once
    /// and remembered. A tool the model cannot tell about changes data: a question's run is not
    /// offered it.
    pub async fn read_only(&self, model: &dyn ChatModel, tools: &[ToolSpec]) -> HashSet<String> {
        let mut out = HashSet::new();
        for tool in tools.iter().filter(|tool| tool.risk == Risk::None) {
            let key = (tool.name.clone(), tool.description.clone());
            let known = self.read_only.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key).copied();
            let read_only = match known {
                Some(known) => known,
                None => {
                    let answer = match Self::ask(
                        model,
                        effect_prompt(tool),
                        &choice_schema("effect", &["changes data", "only reads or shows"]),
                    )
                    .await
                    {
                        Ok(text) => read_word(&text, "effect", &["changes", "only reads"]),
                        Err(error) => {
                            tracing::warn!(tool = tool.name, %error, "could not ask what the tool changes");
                            None
                        }
                    };
                    let read_only = answer == Some("only reads");
                    if answer.is_some() {
                        tracing::info!(tool = tool.name, read_only, "the model says what the tool changes");
                        let mut memory = self.read_only.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        if memory.len() >= MAX_REMEMBERED {
                            memory.clear();
                        }
                        memory.insert(key, read_only);
                    }
                    read_only
                }
            };
            if read_only {
                out.insert(tool.name.clone());
            }
        }
        out
    }
}

impl QuestionCheck {
    /// How likely it is that `message` asks for what `tool` does, from the model's token
    /// probabilities ([`ChatModel::yes_probability`]); `None` when the provider does not give
    /// them or could not be asked (the call is then not checked).
    ///
    /// The message is asked about alone first; only when that is below `threshold` is it asked
    /// again as a reply to `last_answer` (a short reply, "the blue one", needs it), and the
    /// higher of the two counts ([`Fit::probability`]; [`Fit::alone`] says whether the message
    /// alone reached the threshold). Measured with the 1.5B model, an answer before the message
    /// lowers the probability of calls it asked for (0.55 to 0.75 for "Go back to the home
    /// page." and "Take me to my cart." in a conversation, ≥ 0.77 alone).
    pub async fn fit(
        &self,
        model: &dyn ChatModel,
        message: &str,
        last_answer: Option<&str>,
        tool: &ToolSpec,
        threshold: f64,
    ) -> Option<Fit> {
        let ask = |prompt: String| async move {
            match model.yes_probability(&prompt).await {
                Ok(probability) => probability,
                Err(error) => {
                    tracing::warn!(tool = tool.name, %error, "could not ask whether the message asks for the call; it runs unchecked");
                    None
                }
            }
        };
        let alone = ask(fit_prompt(message, None, tool)).await?;
        let probability = match last_answer {
            Some(answer) if alone < threshold => {
                ask(fit_prompt(message, Some(answer), tool)).await.map_or(alone, |after| after.max(alone))
            }
            _ => alone,
        };
        Some(Fit { probability, alone: alone >= threshold })
    }

    /// Whether the message asks rather for another of `tools` (the actions that change
    /// something, the one called among them), or for none of them: the model is asked which of
    /// them the message asks for (after `last_answer` when given), and the likeliest other answer
    /// is returned with how many times likelier it is than the tool called, and so is "None of
    /// these" (`None` when the provider gives no probabilities, or there is nothing to compare).
    /// Measured with the 1.5B model on 41 message/call pairs from 7 apps: the 28 calls that fit their message scored at most 2.0,
    /// and 10 of the 13 that do not scored over 3 (`cancel_event` for "Move my 3pm meeting to
    /// 4pm.", which the yes-or-no question passed at 0.86, scored 9.9).
    pub async fn rival(
        &self,
        model: &dyn ChatModel,
        message: &str,
        last_answer: Option<&str>,
        called: &str,
        tools: &[&ToolSpec],
    ) -> Option<Rival> {
        let tools = &tools[..tools.len().min(MOST_RIVALS)];
        let at = tools.iter().position(|tool| tool.name == called)?;
        let labels = &LETTERS[..=tools.len()];
        let shares = match model.choice_probabilities(&rival_prompt(message, last_answer, tools), labels).await {
            Ok(shares) => shares?,
            Err(error) => {
                tracing::warn!(tool = called, %error, "could not ask which action the message asks for; the call runs");
                return None;
            }
        };
        let (best, share) =
            shares.iter().enumerate().filter(|(index, _)| *index != at).max_by(|a, b| a.1.total_cmp(b.1))?;
        let own = shares[at].max(1e-6);
        Some(Rival {
            tool: tools.get(best).map(|tool| tool.name.clone()),
            ratio: share / own,
            none: shares[tools.len()] / own,
        })
    }

    /// Whether another of `others` (the app's other actions that change something) fits the
    /// message better than the tool called, whose fit question scored `called`: the same
    /// yes-or-no question ([`fit_prompt`]) is asked about each of them, one at a time and in the
    /// same reading (after `last_answer` when given), and the one whose "no" is least likely is
    /// returned with how many times likelier "no" is for the tool called. Asked one tool at a
    /// time, the answer does not depend on where a tool stands in a list (the multiple choice
    /// of [`rival`](Self::rival) does). `None` when there are no others, or the provider gives
    /// no token probabilities or could not be asked (the call then runs as before).
    pub async fn better_fit(
        &self,
        model: &dyn ChatModel,
        message: &str,
        last_answer: Option<&str>,
        called: f64,
        others: &[&ToolSpec],
    ) -> Option<BetterFit> {
        let mut best: Option<(f64, &ToolSpec)> = None;
        for tool in others.iter().take(MOST_RIVALS) {
            let probability = match model.yes_probability(&fit_prompt(message, last_answer, tool)).await {
                Ok(probability) => probability?,
                Err(error) => {
                    tracing::warn!(tool = tool.name, %error, "could not ask whether the message asks for another action; the call runs");
                    return None;
                }
            };
            if best.is_none_or(|(known, _)| probability > known) {
                best = Some((probability, tool));
            }
        }
        let (probability, tool) = best?;
        Some(BetterFit {
            tool: tool.name.clone(),
            probability,
            ratio: (1.0 - called).max(0.0) / (1.0 - probability).max(1e-6),
        })
    }

    /// How likely it is that `message` asks for `value` as `argument`: the model's probability
    /// of "yes", asked alone ([`value_prompt`]); `None` when the provider gives no token
    /// probabilities or could not be asked (the value is then not checked). The questions about
    /// one message share their first line, which a provider that keeps the prompt's prefix
    /// (llama.cpp) reads once.
    pub async fn value(
        &self,
        model: &dyn ChatModel,
        message: &str,
        last_answer: Option<&str>,
        argument: &str,
        value: &str,
    ) -> Option<f64> {
        match model.yes_probability(&value_prompt(message, last_answer, argument, value)).await {
            Ok(probability) => probability,
            Err(error) => {
                tracing::warn!(argument, %error, "could not ask whether the message asks for the value; it is not checked");
                None
            }
        }
    }

    /// The probability that `answer` says what `message` asks for was done ([`done_prompt`]);
    /// `None` when the model gives no probabilities or could not be asked (then the answer is
    /// not held back for it).
    pub async fn says_done(&self, model: &dyn ChatModel, message: &str, answer: &str) -> Option<f64> {
        match model.yes_probability(&done_prompt(message, answer)).await {
            Ok(probability) => probability,
            Err(error) => {
                tracing::warn!(%error, "could not ask whether the answer says it was done; it is not checked");
                None
            }
        }
    }

    /// Whether `tool` only reads or shows ([`read_only`](Self::read_only) for one tool).
    pub async fn is_read_only(&self, model: &dyn ChatModel, tool: &ToolSpec) -> bool {
        self.read_only(model, std::slice::from_ref(tool)).await.contains(&tool.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_a_tool_by_the_word_only_its_name_has() {
        let mail = ["open_email", "archive_email", "deleteEmail", "reply_email"];
        assert!(names_tool("Archive Carla's message.", "archive_email", &mail));
        assert!(names_tool("Please delete the invoice.", "deleteEmail", &mail));
        assert!(names_tool("I archived it by mistake, archive it again", "archive_email", &mail));
        assert!(!names_tool("Mark all my emails as read.", "archive_email", &mail), "email is in every name");
        let shop = ["cart_add", "cart_remove", "open_cart", "checkout"];
        assert!(!names_tool("Remove the red mug from my cart.", "cart_add", &shop));
        assert!(names_tool("Add two posters.", "cart_add", &shop));
        assert!(!names_tool("Address it to Ana.", "cart_add", &shop), "a short word names only as a whole word");
        assert!(names_tool("Check out, please.", "checkout", &shop));
        assert!(!names_tool("Check my cart.", "checkout", &shop));
    }

    #[test]
    fn an_action_of_the_answer_before_is_not_the_messages_unless_the_message_is_a_reply() {
        let listed = |actions: &[&str]| actions.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        // Measured with the 1.5B model (the task benchmark, shop with instructions, 2026-12-07).
        let posters = listed(&["open home page", "order two space posters"]);
        assert_eq!(message_actions("I'd like two space posters, please.", &posters), [&posters[1]]);
        let invoice = listed(&["archive the email", "delete the invoice"]);
        assert_eq!(message_actions("Now delete the invoice.", &invoice), [&invoice[1]]);
        let three = listed(&["Add 2 T-shirts", "Add a mug", "Check out"]);
        assert_eq!(message_actions("Add 2 T-shirts and a mug, and check out.", &three).len(), 3);
        let offered = listed(&["add the red mug", "check out"]);
        assert_eq!(message_actions("Yes.", &offered).len(), 2, "a reply takes what the answer offered");
        let both = listed(&["archive Carla's email", "reply to Ana"]);
        assert_eq!(message_actions("Yes, both please.", &both).len(), 2, "\"please\" is no action's word");
    }

    #[test]
    fn a_message_that_names_two_tools_has_a_part_for_each() {
        let mail = ["open_email", "archive_email", "delete_email", "reply_email"];
        let two = "Delete the invoice and archive the slides email.";
        assert_eq!(part_for_tool(two, "archive_email", &mail), Some("archive the slides email."));
        assert_eq!(part_for_tool(two, "delete_email", &mail), Some("Delete the invoice and"));
        let then = "Archive the invoice from Bob, then reply to Ana.";
        assert_eq!(part_for_tool(then, "archive_email", &mail), Some("Archive the invoice from Bob, then"));
        assert_eq!(part_for_tool(then, "reply_email", &mail), Some("reply to Ana."));
        // One tool named, or the one called not named: the whole message is the call's.
        assert_eq!(part_for_tool("Archive the invoice and the slides.", "archive_email", &mail), None);
        assert_eq!(part_for_tool(two, "reply_email", &mail), None);
        let shop = ["cart_add", "cart_remove"];
        let swap = "Remove the red mug and add the blue one.";
        assert_eq!(part_for_tool(swap, "cart_remove", &shop), Some("Remove the red mug and"));
        assert_eq!(part_for_tool(swap, "cart_add", &shop), Some("add the blue one."));
    }

    #[test]
    fn one_word_answers_are_read_from_json_or_from_prose() {
        let kinds = ["question", "request"];
        assert_eq!(read_word(r#"{"kind": "question"}"#, "kind", &kinds), Some("question"));
        assert_eq!(read_word(r#"{"kind":"Request"}"#, "kind", &kinds), Some("request"));
        assert_eq!(read_word("It is a question, not a request.", "kind", &kinds), Some("question"));
        assert_eq!(read_word("I cannot tell.", "kind", &kinds), None);
        let effects = ["changes", "only reads"];
        assert_eq!(read_word(r#"{"effect": "only reads or shows"}"#, "effect", &effects), Some("only reads"));
        assert_eq!(read_word(r#"{"effect": "changes data"}"#, "effect", &effects), Some("changes"));
    }

    #[test]
    fn a_value_is_refused_when_another_outscores_it_or_none_is_asked_for() {
        // Figures the 1.5B model gave (docs/models.md).
        assert_eq!(judge_values(&[0.13, 0.35], 0), ValueVerdict::Other(1), "blue mug for \"remove the red mug\"");
        assert_eq!(judge_values(&[0.13, 0.35], 1), ValueVerdict::Fits);
        assert_eq!(judge_values(&[0.09], 0), ValueVerdict::NotAsked, "the only product allowed, not the one asked for");
        assert_eq!(judge_values(&[0.18], 0), ValueVerdict::NotAsked);
        assert_eq!(judge_values(&[0.43], 0), ValueVerdict::Fits, "the only product allowed, and asked for");
        assert_eq!(judge_values(&[0.10, 0.12], 0), ValueVerdict::NotAsked, "an item the list does not have");
        // Two products a message asks for alike are undecided too; a message that names them
        // ("one space poster and one blue mug") or points at them through the app's data is
        // not asked about.
        assert_eq!(
            judge_values(&[0.31, 0.19, 0.17, 0.31], 3),
            ValueVerdict::Undecided,
            "one of two products asked for"
        );
        assert_eq!(judge_values(&[0.30, 0.35], 0), ValueVerdict::Undecided, "alike: the model guessed");
        assert_eq!(judge_values(&[0.28, 0.30], 0), ValueVerdict::Undecided, "\"the cheapest seat\": first");
        assert_eq!(judge_values(&[0.23, 0.31], 1), ValueVerdict::Fits, "\"an economy seat\": tourist");
        assert_eq!(judge_values(&[0.20, 0.34], 0), ValueVerdict::Fits, "outscored, under twice: the model's choice");
        assert_eq!(
            judge_values(&[0.21, 0.23, 0.21, 0.18], 0),
            ValueVerdict::NotAsked,
            "\"Open my cart.\" for cart_add: no product asked for (the task benchmark)"
        );
        assert_eq!(judge_values(&[0.30, 0.30, 0.23], 2), ValueVerdict::Fits, "a size asked for in other words");
        assert_eq!(judge_values(&[0.27, 0.06], 0), ValueVerdict::Fits, "\"Cross off the dentist.\"");
        assert_eq!(judge_values(&[], 0), ValueVerdict::Fits);
        assert_eq!(
            value_prompt("the blue one", Some("Which mug?"), "productId", "mug-blue"),
            "Your last message: \"Which mug?\"\nMessage: \"the blue one\"\n\nDoes the message ask for productId \
             \"mug-blue\"? Answer yes or no."
        );
    }

    #[test]
    fn a_value_is_named_when_each_of_its_words_is_in_the_message() {
        assert!(names_value("Add the red mug to my cart.", "mug-red"));
        assert!(names_value("Remove 'buy milk' from my list.", "buy milk"));
        assert!(names_value("Book me a Tourist seat.", "tourist"));
        assert!(!names_value("Please put 3 black T-shirts in my cart.", "tee-black"));
        assert!(!names_value("Remove the red mug.", "mug-blue"));
        assert!(!names_value("Add a mug.", "mug-red"), "one word of two");
        assert!(!names_value("Add a mug.", "--"), "a value of no words is never named");
        assert!(!names_value("the reds", "red"), "whole words only");
    }

    #[test]
    fn the_prompts_quote_the_message_the_answer_before_it_and_the_tool() {
        assert!(kind_prompt("What can you do?").starts_with("The user's message: \"What can you do?\""));
        let tool = ToolSpec::new("cart_add", "Add a product to the shopping cart.");
        assert!(effect_prompt(&tool).starts_with("Tool: cart_add: Add a product to the shopping cart.\n"));
        assert_eq!(
            fit_prompt("the blue one", Some("Which mug, red or blue?"), &tool),
            "Your last message: \"Which mug, red or blue?\"\nMessage: \"the blue one\"\nAction: Add a product to the \
             shopping cart.\n\nDid the message ask for this action? Answer yes or no."
        );
    }
}
