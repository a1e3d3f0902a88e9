//! Which of an argument's allowed values a message points at through what the app says about
//! them: `e4` is "Carla Diaz, Slides for Monday" in the inbox the app shares, so "Archive Carla's
//! message." points at `e4` although it never writes it ([`grounded_values`]).

use serde_json::Value;

/// Words too common to point at one entry of the app's data, whatever the app.
const COMMON: [&str; 40] = [
    "the", "and", "for", "you", "your", "our", "not", "but", "are", "was", "has", "had", "its", "this", "that", "with",
    "from", "have", "will", "what", "when", "been", "into", "about", "there", "their", "them", "they", "here",
    "please", "just", "some", "more", "only", "also", "than", "then", "very", "true", "false",
];

/// A word of the app's data or of a message that may point at an entry: four letters or more, or
/// three with a capital in the data ("Ana", "Bob"), and not a [`COMMON`] word. Lowercase.
fn words(text: &str, names_too: bool) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| {
            let n = w.chars().count();
            n >= 4 || (n == 3 && (!names_too || w.chars().next().is_some_and(char::is_uppercase)))
        })
        .map(str::to_lowercase)
        .filter(|w| !COMMON.contains(&w.as_str()))
        .collect()
}

/// Whether `text` has the words of `value` in a row (`mug-red` in "Red mug (mug-red)", `e4` in
/// "e4: from Carla").
fn mentions(text: &str, value: &str) -> bool {
    let value = crate::claims::plain_words(value);
    !value.is_empty() && crate::claims::plain_words(text).windows(value.len()).any(|run| run == value.as_slice())
}

/// Every string and number in `value`, joined by spaces.
fn leaves(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            out.push(' ');
            out.push_str(text);
        }
        Value::Number(n) => {
            out.push(' ');
            out.push_str(&n.to_string());
        }
        Value::Array(items) => items.iter().for_each(|item| leaves(item, out)),
        Value::Object(fields) => fields.values().for_each(|field| leaves(field, out)),
        _ => {}
    }
}

/// The pieces of `source` that mention `value`: an element of a list that has it (all of that
/// element's text), or a line (or a `;`-separated part of one) of a text that has it.
fn pieces(source: &Value, value: &str, out: &mut Vec<String>) {
    match source {
        Value::String(text) => {
            for part in text.lines().flat_map(|line| line.split("; ")) {
                if mentions(part, value) {
                    out.push(part.to_string());
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                let mut text = String::new();
                leaves(item, &mut text);
                if !item.is_array() && mentions(&text, value) {
                    out.push(text);
                } else if item.is_array() || item.is_object() {
                    pieces(item, value, out);
                }
            }
        }
        Value::Object(fields) => fields.values().for_each(|field| pieces(field, value, out)),
        _ => {}
    }
}

/// For each of `allowed`, how many of the words that only its pieces of the app's data have
/// (`sources`: the app state's values and the run's results; [`pieces`]) are words of
/// `message` (`Carla` for `e4` in "Archive Carla's message."). Words of `ignore` (the tool's
/// name and description) and of the values themselves do not count. All zero when the data says
/// nothing that tells the values apart.
pub fn grounded_values(message: &str, allowed: &[&str], sources: &[Value], ignore: &str) -> Vec<usize> {
    let ignored = words(ignore, false);
    let said = words(message, false);
    let own: Vec<Vec<String>> = allowed
        .iter()
        .map(|value| {
            let mut found = Vec::new();
            for source in sources {
                pieces(source, value, &mut found);
            }
            let mut own: Vec<String> = found.iter().flat_map(|piece| words(piece, true)).collect();
            own.sort();
            own.dedup();
            let value_words = crate::claims::plain_words(value);
            own.retain(|w| !value_words.contains(w) && !ignored.contains(w));
            own
        })
        .collect();
    let said_one = |word: &str| {
        said.iter().any(|w| w == word || w.strip_suffix('s') == Some(word) || word.strip_suffix('s') == Some(w))
    };
    own.iter()
        .enumerate()
        .map(|(at, mine)| {
            mine.iter()
                .filter(|w| own.iter().enumerate().all(|(other, theirs)| other == at || !theirs.contains(w)))
                .filter(|w| said_one(w))
                .count()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inbox() -> Vec<Value> {
        vec![json!([
            {"id": "e1", "from": "Ana Ruiz <ana@example.com>", "subject": "Lunch on Friday?", "unread": true},
            {"id": "e2", "from": "City Bank <no-reply@citybank.example>", "subject": "Your November statement"},
            {"id": "e3", "from": "Bob Chen <bob@chen.example>", "subject": "Invoice 221 for the website"},
            {"id": "e4", "from": "Carla Diaz <carla@example.com>", "subject": "Slides for Monday"},
        ])]
    }

    const IDS: [&str; 4] = ["e1", "e2", "e3", "e4"];
    const TOOL: &str = "archive_email Move an email out of the inbox into the archive.";

    #[test]
    fn a_message_points_at_the_entry_whose_own_words_it_uses() {
        let grounded = |message: &str| grounded_values(message, &IDS, &inbox(), TOOL);
        assert_eq!(grounded("Archive Carla's message."), [0, 0, 0, 1]);
        assert_eq!(grounded("Delete the invoice from Bob."), [0, 0, 2, 0]);
        assert_eq!(grounded("Get rid of the bank email."), [0, 1, 0, 0]);
        assert_eq!(grounded("Tell Ana that Friday works for me."), [2, 0, 0, 0]);
        assert_eq!(grounded("Delete the invoice and archive the slides."), [0, 0, 1, 1]);
        // Nothing that tells them apart: "from", "example", "email" are everyone's, or common.
        assert_eq!(grounded("Archive the email from Dave."), [0, 0, 0, 0]);
        assert_eq!(grounded("Archive everything from your inbox."), [0, 0, 0, 0]);
    }

    #[test]
    fn lines_of_a_text_and_results_point_too() {
        let products = vec![json!(
            "Red mug (mug-red): $12.00. A red ceramic mug, 350 ml.\nSpace poster (poster-space): $15.00. A poster of the Milky Way."
        )];
        let allowed = ["mug-red", "poster-space"];
        assert_eq!(grounded_values("Add the Milky Way one.", &allowed, &products, "cart_add"), [0, 2]);
        assert_eq!(grounded_values("Add the ceramic one.", &allowed, &products, "cart_add"), [1, 0]);
        let result = vec![json!("Trains: Train 412 dep 08:10 morning; Train 418 dep 17:30 evening")];
        assert_eq!(grounded_values("the evening one", &["412", "418"], &result, "book_ticket"), [0, 1]);
    }
}
