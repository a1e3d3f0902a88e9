//! Values a call made up: identifiers (an address, a link, an id) that appear nowhere the model
//! could have read them ([`AgentLoop::with_made_up_check`](crate::AgentLoop::with_made_up_check)).

use serde_json::Value;

use crate::model::{ChatMessage, NoteKind};

/// Whether `value` reads as an identifier rather than words: one token (no whitespace) with a
/// letter in it, and an `@`, `/`, `:`, `.`, `_`, `#` or a digit (`ana@example.com`,
/// `https://…`, `INV-221`). Plain words ("Accepted", "milk") are not checked: a model may write
/// them in its own words; an address or an id it cannot.
pub fn looks_like_identifier(value: &str) -> bool {
    let value = value.trim().trim_end_matches('.');
    !value.is_empty()
        && !value.chars().any(char::is_whitespace)
        && value.chars().any(char::is_alphabetic)
        && value.chars().any(|c| c.is_ascii_digit() || "@/:._#".contains(c))
}

/// The form of an identifier that is compared with what the model read: lowercase, without a
/// scheme (`https://`, `mailto:`) or a trailing `/` or `.`, so a link the user wrote without its
/// scheme still matches.
fn comparable(value: &str) -> String {
    let value = value.trim().to_lowercase();
    let value =
        ["https://", "http://", "mailto:"].iter().fold(value.as_str(), |v, scheme| v.strip_prefix(scheme).unwrap_or(v));
    value.trim_end_matches(['/', '.']).to_string()
}

/// The first string of `args` (at any depth; its JSON Pointer and the value) that reads as an
/// identifier ([`looks_like_identifier`]) and is not in `seen`, the lowercase text of everything
/// the model was shown ([`seen_text`]). An argument whose schema lists its values (`enum`,
/// `const`) is left to the validation and the value check.
pub fn made_up_value(args: &Value, parameters: &Value, seen: &str) -> Option<(String, String)> {
    fn walk(value: &Value, schema: Option<&Value>, path: &str, seen: &str) -> Option<(String, String)> {
        if schema.is_some_and(|s| s.get("enum").is_some() || s.get("const").is_some()) {
            return None;
        }
        match value {
            Value::String(text) if looks_like_identifier(text) && !seen.contains(&comparable(text)) => {
                Some((if path.is_empty() { "/".into() } else { path.to_string() }, text.trim().to_string()))
            }
            Value::Object(fields) => fields.iter().find_map(|(key, field)| {
                let sub = schema.and_then(|s| s.get("properties")).and_then(|p| p.get(key));
                walk(field, sub, &format!("{path}/{key}"), seen)
            }),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find_map(|(at, item)| walk(item, schema.and_then(|s| s.get("items")), &format!("{path}/{at}"), seen)),
            _ => None,
        }
    }
    walk(args, Some(parameters), "", seen)
}

/// Words an argument's name has that do not label a number by themselves (`train_id`,
/// `order_number`: "train", "order").
const NOT_LABELS: [&str; 6] = ["id", "no", "nr", "num", "number", "count"];

/// A run of digits as the number checks compare it: without leading zeros, `0` kept (`0412` and
/// `412` are one number).
fn plain_number(digits: &str) -> &str {
    let number = digits.trim_start_matches('0');
    if number.is_empty() && !digits.is_empty() { "0" } else { number }
}

/// Whether `words` ([`plain_words`](crate::claims::plain_words)) have `number` in digits.
fn has_digits(words: &[String], number: &str) -> bool {
    words.iter().any(|word| plain_number(word) == number)
}

/// The numbers `shown` (lowercase) labels with one of `labels`: each run of digits whose word
/// before it, skipping a `no`/`nr`/`number`/`id` and anything not a letter or digit, is a label
/// ("Train 412", "train no. 418", `"train":420`).
fn labelled_numbers(shown: &str, labels: &[String]) -> Vec<String> {
    let words = crate::claims::plain_words(shown);
    let mut found: Vec<String> = Vec::new();
    for (at, word) in words.iter().enumerate() {
        if !word.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let before = words[..at].iter().rev().find(|w| !NOT_LABELS.contains(&w.as_str()));
        let number = plain_number(word);
        if before.is_some_and(|w| labels.iter().any(|label| label == w)) && !found.iter().any(|f| f == number) {
            found.push(number.to_string());
        }
    }
    found
}

/// Words for the numbers a user may write out ("two mugs"), each the number it is.
const NUMBER_WORDS: [(&str, u64); 22] = [
    ("zero", 0),
    ("one", 1),
    ("two", 2),
    ("three", 3),
    ("four", 4),
    ("five", 5),
    ("six", 6),
    ("seven", 7),
    ("eight", 8),
    ("nine", 9),
    ("ten", 10),
    ("eleven", 11),
    ("twelve", 12),
    ("thirteen", 13),
    ("fourteen", 14),
    ("fifteen", 15),
    ("sixteen", 16),
    ("seventeen", 17),
    ("eighteen", 18),
    ("nineteen", 19),
    ("twenty", 20),
    ("dozen", 12),
];

/// Whether `words` ([`plain_words`](crate::claims::plain_words)) have `number` (digits, no
/// leading zeros): as digits ("412", "0412") or written out ("two").
fn has_number(words: &[String], number: &str) -> bool {
    let value = number.parse::<u64>().ok();
    has_digits(words, number)
        || NUMBER_WORDS.iter().any(|(name, named)| Some(*named) == value && words.iter().any(|word| word == name))
}

/// A top-level argument given a whole number that may name one of the app's things: its schema
/// lists no values (`enum`, `const`: the validation's and the value check's) and gives no range
/// or default (`minimum`, `maximum`, `default`: an amount, "quantity 1 to 10"). The argument,
/// the number without leading zeros, and the words of the argument's name that may label it
/// (three letters or more, not `id`, `number`, …: `train_id` → "train"); none when its name has
/// no such word.
fn numbers_given(args: &Value, parameters: &Value) -> Vec<(String, String, Vec<String>)> {
    let Some(fields) = args.as_object() else { return Vec::new() };
    fields
        .iter()
        .filter_map(|(argument, value)| {
            let schema = parameters.get("properties").and_then(|p| p.get(argument));
            let keys = ["enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "default"];
            if schema.is_some_and(|s| keys.iter().any(|key| s.get(key).is_some())) {
                return None;
            }
            let number = match value {
                Value::Number(n) if n.is_u64() || n.is_i64() => n.to_string(),
                Value::String(text) if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) => text.clone(),
                _ => return None,
            };
            let labels: Vec<String> = crate::questions::name_words(argument)
                .into_iter()
                .filter(|word| word.chars().count() >= 3 && !NOT_LABELS.contains(&word.as_str()))
                .collect();
            (!labels.is_empty()).then(|| (argument.clone(), plain_number(&number).to_string(), labels))
        })
        .collect()
}

/// A whole number a call gives a top-level argument that is not what the app calls by the
/// argument's name: the app labels numbers with a word of the name (`train`: "Train 412 dep
/// 08:10, first 95000 ARS, tourist 41000 ARS; Train 418 …", `{"train": 418}`) and never this
/// one, and no message of the user's (`said`) has it, in digits or words. The argument, the
/// number and the numbers the app labels so, in the order shown. Measured with the 1.5B model:
/// "Book me a tourist seat on the morning train" booked train 41000, the tourist fare. An
/// argument whose schema lists its values, or gives a range or a default (an amount), is left
/// alone ([`numbers_given`]), and so is one the app labels no number with.
pub fn mislabelled_number(
    args: &Value,
    parameters: &Value,
    shown: &str,
    said: &str,
) -> Option<(String, String, Vec<String>)> {
    let said = crate::claims::plain_words(said);
    numbers_given(args, parameters).into_iter().find_map(|(argument, number, labels)| {
        if has_number(&said, &number) {
            return None;
        }
        let named = labelled_numbers(shown, &labels);
        (!named.is_empty() && !named.contains(&number)).then_some((argument, number, named))
    })
}

/// A whole number a call gives a top-level argument ([`numbers_given`]) that is nowhere in what
/// the model read (`seen`, [`seen_text`]: the app's results and state, the tools, the
/// conversation), in digits, nor in the user's messages (`said`) in digits or words ("seven"),
/// when one of `tools` (the names of the other tools the app offers) has a
/// word of the argument's name, singular or plural: the app has a tool for such things (one to
/// list them, most often), and nothing it showed has this one. The argument, the number, and
/// that tool. Measured with the 0.5B model on the travel example: bookings of train 101 and of
/// train 1 before any `find_trains` call (which that model took for a tool that changes data).
pub fn unshown_number(
    args: &Value,
    parameters: &Value,
    seen: &str,
    said: &str,
    tools: &[&str],
) -> Option<(String, String, String)> {
    let (seen, said) = (crate::claims::plain_words(seen), crate::claims::plain_words(said));
    numbers_given(args, parameters).into_iter().find_map(|(argument, number, labels)| {
        if has_digits(&seen, &number) || has_number(&said, &number) {
            return None;
        }
        let names_label = |tool: &&&str| {
            crate::questions::name_words(tool)
                .iter()
                .any(|word| labels.iter().any(|label| word == label || word.strip_suffix('s') == Some(label.as_str())))
        };
        let tool = tools.iter().find(names_label)?;
        Some((argument, number, (*tool).to_string()))
    })
}

/// Words that say how many without a number ("a couple of mugs", "double it", "the same again"):
/// a message with one may well ask for an amount other than the default.
const AMOUNT_WORDS: [&str; 14] = [
    "couple", "pair", "few", "several", "double", "triple", "twice", "thrice", "half", "same", "many", "much", "both",
    "all",
];

/// Words of an argument's name that make it a count of things (`quantity`, `qty`, `seatCount`,
/// `num_guests`): names apps give amounts whatever they sell. An integer with a default that is
/// not named so (`priority`: "as high priority" may well be 2) is not an amount here.
const AMOUNT_NAMES: [&str; 16] = [
    "quantity", "qty", "count", "amount", "copies", "seats", "guests", "people", "persons", "nights", "tickets",
    "units", "items", "pieces", "times", "num",
];

/// An amount a call gives that the user did not ask for: a top-level argument named as an amount
/// ([`AMOUNT_NAMES`]) whose schema gives a numeric `default` (what it is when left out:
/// `quantity`, 1) is given another whole number, and `said` (the user's message, or its part
/// that asks for this call) has no number at all, in digits or words, nor a word that says how
/// many without one ([`AMOUNT_WORDS`]). The argument, the number and the default. Measured with
/// the 1.5B model on the storefront: "Buy me a large black T-shirt as well." added two. An amount
/// the message does say ("three", "a couple", "12") is left to the model, and so is one whose
/// schema gives no default.
pub fn unasked_amount(args: &Value, parameters: &Value, said: &str) -> Option<(String, String, String)> {
    let words = crate::claims::plain_words(said);
    let counts = |word: &String| {
        word.chars().any(|c| c.is_ascii_digit())
            || NUMBER_WORDS.iter().any(|(name, _)| name == word)
            || AMOUNT_WORDS.contains(&word.as_str())
    };
    if words.iter().any(counts) {
        return None;
    }
    let fields = args.as_object()?;
    let amount = |argument: &str| {
        crate::questions::name_words(argument).iter().any(|word| AMOUNT_NAMES.contains(&word.as_str()))
    };
    fields.iter().filter(|(argument, _)| amount(argument)).find_map(|(argument, value)| {
        let default = parameters.get("properties")?.get(argument)?.get("default")?;
        let (given, default) = (value.as_f64()?, default.as_f64()?);
        (given != default && given.fract() == 0.0).then(|| (argument.clone(), value.to_string(), default.to_string()))
    })
}

/// Everything the model was shown that a value may come from, lowercase: the system prompt, the
/// user's messages, the agent's earlier answers (before `run_start`, the run's own messages
/// after it: what the model wrote in this run is not a source), the results of calls that
/// succeeded, the app state (`context`, as JSON) and the tools' descriptions and schemas. Not
/// the loop's notes or refused calls' results, which quote the model's own values back to it.
pub(crate) fn seen_text(
    system: &str,
    messages: &[ChatMessage],
    run_start: usize,
    context: &[Value],
    tools: &[&tether_protocol::ToolSpec],
) -> String {
    text_of(system, messages, Some(run_start), context, tools)
}

/// What the app showed, lowercase: [`seen_text`] without the conversation's words (the user's
/// messages and the agent's answers): the system prompt, the results of calls that succeeded,
/// the app state and the tools. What a name the user uses is looked for in
/// ([`unknown_names`](crate::grounding::unknown_names)).
pub(crate) fn shown_text(
    system: &str,
    messages: &[ChatMessage],
    context: &[Value],
    tools: &[&tether_protocol::ToolSpec],
) -> String {
    text_of(system, messages, None, context, tools)
}

/// [`seen_text`] (`run_start` given: the conversation's words count) or [`shown_text`].
fn text_of(
    system: &str,
    messages: &[ChatMessage],
    run_start: Option<usize>,
    context: &[Value],
    tools: &[&tether_protocol::ToolSpec],
) -> String {
    let mut seen = system.to_lowercase();
    let mut add = |text: &str| {
        seen.push('\n');
        seen.push_str(&text.to_lowercase());
    };
    for (at, message) in messages.iter().enumerate() {
        match message {
            ChatMessage::User { content } if run_start.is_some() => add(content),
            ChatMessage::Assistant { content, .. } if run_start.is_some_and(|start| at < start) => add(content),
            ChatMessage::Tool { status, content, .. } if status.is_ok() => add(content),
            ChatMessage::Note { kind: NoteKind::AppState | NoteKind::AppStateChanged, content } => add(content),
            _ => {}
        }
    }
    for value in context {
        add(&match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        });
    }
    for tool in tools {
        add(&tool.name);
        add(&tool.description);
        add(&tool.parameters.to_string());
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tether_protocol::ResultStatus;

    #[test]
    fn addresses_links_and_ids_are_identifiers_and_words_are_not() {
        for id in ["ana@example.com", "https://example.com/x", "INV-221", "order_7", "#general", "e3"] {
            assert!(looks_like_identifier(id), "{id}");
        }
        for words in ["Accepted", "milk", "buy milk", "2026-12-06", "42", "", "Thanks, see you Friday."] {
            assert!(!looks_like_identifier(words), "{words}");
        }
    }

    #[test]
    fn an_identifier_nobody_wrote_is_made_up_and_one_the_model_read_is_not() {
        let schema = json!({"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}, "id": {"enum": ["e1", "e9"]}}});
        let seen = "the user's message: email carla@example.com\n[{\"id\":\"e1\"}] see example.com/slides";
        let call = |args: Value| made_up_value(&args, &schema, seen);
        assert_eq!(
            call(json!({"to": " accountant@example.com", "body": "Please forward."})),
            Some(("/to".into(), "accountant@example.com".into()))
        );
        assert_eq!(call(json!({"to": "Carla@Example.com", "body": "Thanks for the slides, they are great."})), None);
        assert_eq!(call(json!({"to": "https://example.com/slides/"})), None, "a scheme and a trailing slash aside");
        assert_eq!(call(json!({"id": "e9"})), None, "an enum's values are the value check's");
        assert_eq!(
            call(json!({"cc": ["carla@example.com", "dave@example.com"]})),
            Some(("/cc/1".into(), "dave@example.com".into()))
        );
    }

    #[test]
    fn a_number_the_app_labels_as_something_else_is_mislabelled() {
        let schema = json!({"type": "object", "properties": {"train": {"type": "integer"}, "seat_class": {"enum": ["first", "tourist"]}, "quantity": {"type": "integer"}}});
        let shown =
            "trains to mar del plata: train 412 dep 08:10, first 95000 ars, tourist 41000 ars; train no. 418 dep 17:30";
        let call = |args: Value, said: &str| mislabelled_number(&args, &schema, shown, said);
        assert_eq!(
            call(json!({"train": 41000, "seat_class": "tourist"}), "book me a tourist seat on the morning train"),
            Some(("train".into(), "41000".into(), vec!["412".into(), "418".into()]))
        );
        assert_eq!(call(json!({"train": 418}), "the evening train"), None, "a train the app labels so");
        assert_eq!(call(json!({"train": "0412"}), ""), None, "as a string, leading zeros aside");
        let zero = mislabelled_number(&json!({"train": 0}), &schema, "train 0 dep 06:00; train 418 dep 17:30", "");
        assert_eq!(zero, None, "train 0, as the app shows it");
        assert_eq!(call(json!({"train": 999}), "book train 999"), None, "the user's own number");
        assert_eq!(call(json!({"quantity": 41000}), ""), None, "the app labels no number as a quantity");
        let json_state = r#"[{"train":420,"seats":3}]"#;
        assert_eq!(
            mislabelled_number(&json!({"train_id": 3}), &json!({}), json_state, "").map(|found| found.2),
            Some(vec!["420".to_string()]),
            "a word of the name, in JSON"
        );
    }

    #[test]
    fn an_amount_the_message_does_not_say_is_found_and_one_it_says_is_not() {
        let schema = json!({"properties": {
            "productId": {"type": "string"},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            "size": {"type": "string", "enum": ["S", "M", "L"]}
        }});
        let add = |quantity: u64, said: &str| {
            unasked_amount(&json!({"productId": "tee-black", "quantity": quantity, "size": "L"}), &schema, said)
        };
        assert_eq!(
            add(2, "Buy me a large black T-shirt as well."),
            Some(("quantity".to_string(), "2".to_string(), "1".to_string()))
        );
        assert_eq!(add(1, "Buy me a large black T-shirt as well."), None, "the default");
        for said in ["Add 2 black T-shirts.", "add two more", "a couple of T-shirts", "Double it.", "the same again"] {
            assert_eq!(add(2, said), None, "{said}");
        }
        assert_eq!(add(3, "Add two more."), None, "a number said: the model's to read");
        let priority = json!({"properties": {"priority": {"type": "integer", "default": 0}}});
        assert_eq!(unasked_amount(&json!({"priority": 2}), &priority, "Add it as high priority."), None, "no amount");
        let guests = json!({"properties": {"numGuests": {"type": "integer", "default": 1}}});
        assert!(unasked_amount(&json!({"numGuests": 2}), &guests, "Book a room.").is_some(), "camelCase");
        let no_default = json!({"properties": {"quantity": {"type": "integer", "minimum": 1}}});
        assert_eq!(unasked_amount(&json!({"quantity": 2}), &no_default, "Add a mug."), None);
        assert_eq!(
            unasked_amount(&json!({"quantity": 2}), &schema, "Add a mug."),
            Some(("quantity".into(), "2".into(), "1".into()))
        );
    }

    #[test]
    fn an_amount_and_a_number_the_user_wrote_out_are_not_mislabelled() {
        let shown = r#"cart: [{"product":"mug-red","quantity":1}] open orders: order 7731"#;
        let ranged = json!({"properties": {"quantity": {"type": "integer", "minimum": 1, "maximum": 10}}});
        assert_eq!(mislabelled_number(&json!({"quantity": 2}), &ranged, shown, "add two more"), None, "a range");
        let bare = json!({"properties": {"quantity": {"type": "integer"}}});
        assert_eq!(mislabelled_number(&json!({"quantity": 2}), &bare, shown, "Add two more mugs"), None, "in words");
        assert_eq!(mislabelled_number(&json!({"quantity": 12}), &bare, shown, "a dozen mugs"), None);
        assert_eq!(
            mislabelled_number(&json!({"quantity": 3}), &bare, shown, "add two more").map(|found| found.1),
            Some("3".to_string())
        );
    }

    #[test]
    fn a_number_nothing_showed_is_made_up_where_a_tool_is_named_for_such_things() {
        let schema = json!({"properties": {"train": {"type": "integer"}, "guests": {"type": "integer"}, "nights": {"type": "integer", "default": 1}}});
        let tools = ["find_trains", "policy"];
        let seen = "you help employees book one seat on a train.\nbook the cheapest seat on the evening train";
        let said = "Book the cheapest seat on the evening train";
        let call =
            |args: Value, seen: &str, said: &str, tools: &[&str]| unshown_number(&args, &schema, seen, said, tools);
        assert_eq!(
            call(json!({"train": 101}), seen, said, &tools),
            Some(("train".into(), "101".into(), "find_trains".into()))
        );
        assert_eq!(
            call(json!({"train": 1}), seen, said, &tools).map(|found| found.1),
            Some("1".into()),
            "\"one\" is a number word only in what the user wrote"
        );
        assert_eq!(call(json!({"train": 101}), seen, said, &["policy"]), None, "no tool is named for trains");
        let seen_412 = format!("{seen}\n[{{\"train\":412,\"dep\":\"08:10\"}}]");
        assert_eq!(call(json!({"train": 412}), &seen_412, said, &tools), None, "a train shown");
        assert_eq!(call(json!({"train": 7}), seen, "book train seven", &tools), None, "said in words");
        assert_eq!(call(json!({"guests": 3}), seen, said, &tools), None, "no tool is named for guests");
        assert_eq!(call(json!({"nights": 3}), seen, said, &["find_nights"]), None, "a default: an amount");
    }

    #[test]
    fn the_models_own_words_and_refused_results_are_not_sources() {
        let messages = vec![
            ChatMessage::User { content: "Email my accountant.".into() },
            ChatMessage::Assistant { content: "I'll write to acct@firm.example.".into(), tool_calls: Vec::new() },
            ChatMessage::tool("c", "send_email", ResultStatus::Denied, "[denied] Not run: to \"acct@firm.example\" …"),
            ChatMessage::tool("d", "find", ResultStatus::Ok, "found bob@chen.example"),
        ];
        let seen = seen_text("You help.", &messages, 1, &[json!({"me": "me@home.example"})], &[]);
        assert!(!seen.contains("acct@firm.example"));
        assert!(
            seen.contains("bob@chen.example")
                && seen.contains("me@home.example")
                && seen.contains("email my accountant")
        );
        // Before the run (an answer the user read), the same words are a source.
        assert!(seen_text("", &messages, 2, &[], &[]).contains("acct@firm.example"));
        // What the app showed has no words of the conversation's.
        let shown = shown_text("You help.", &messages, &[json!({"me": "me@home.example"})], &[]);
        assert!(shown.contains("bob@chen.example") && shown.contains("me@home.example"));
        assert!(!shown.contains("accountant") && !shown.contains("acct@firm.example"));
    }
}
