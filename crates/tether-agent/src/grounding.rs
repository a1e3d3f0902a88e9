//! Which of an argument's allowed values a message points at through what the app says about
//! them: `e4` is "Carla Diaz, Slides for Monday" in the inbox the app shares, so "Archive Carla's
//! message." points at `e4` although it never writes it ([`grounded_values`]); and the names a
//! message uses that nothing the app shows has ("Dave" in "Archive the email from Dave." when no
//! email is from a Dave: [`unknown_names`]).

use std::collections::HashSet;

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

/// What the app's data says about each of an argument's allowed values, and what a message
/// points at through it ([`grounded_values`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grounding {
    /// For each allowed value, how many of the words only its pieces of the data have are
    /// words of the message.
    pub said: Vec<usize>,
    /// For each allowed value, whether the data has words only its pieces have: the data tells
    /// it apart from the others (an inbox entry does; two fares on one line do not).
    pub described: Vec<bool>,
}

/// For each of `allowed`, how many of the words that only its pieces of the app's data have
/// (`sources`: the app state's values and the run's results; [`pieces`]) are words of
/// `message` (`Carla` for `e4` in "Archive Carla's message."), and whether it has such words at
/// all. Words of `ignore` (the tool's name and description) and of the allowed values do not
/// count. All zero when the data says nothing that tells the values apart.
pub fn grounded_values(message: &str, allowed: &[&str], sources: &[Value], ignore: &str) -> Grounding {
    let ignored = words(ignore, false);
    let said = words(message, false);
    // The values' own words are the value check's to read ("tourist" in a line that has both
    // fares tells nothing about "first").
    let value_words: Vec<String> = allowed.iter().flat_map(|value| crate::claims::plain_words(value)).collect();
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
            own.retain(|w| !value_words.contains(w) && !ignored.contains(w));
            own
        })
        .collect();
    let only: Vec<Vec<&String>> = own
        .iter()
        .enumerate()
        .map(|(at, mine)| {
            mine.iter()
                .filter(|w| own.iter().enumerate().all(|(other, theirs)| other == at || !theirs.contains(w)))
                .collect()
        })
        .collect();
    Grounding {
        said: only.iter().map(|mine| mine.iter().filter(|w| has_word(&said, w)).count()).collect(),
        described: only.iter().map(|mine| !mine.is_empty()).collect(),
    }
}

/// For each of `allowed`, how many of its own words (`poster-space`: "poster", "space"; three
/// letters or more, not a common word) `message` has, singular or plural: "How much would three
/// space posters cost?" names `poster-space` twice, `mug-red` not at all. What the look-up points
/// with when the app's data tells the values apart nowhere ([`grounded_values`] all zero: a
/// product's page shows no other product).
pub(crate) fn named_values(message: &str, allowed: &[&str]) -> Vec<usize> {
    let said = words(message, false);
    allowed
        .iter()
        .map(|value| {
            let mut own = words(value, false);
            own.sort();
            own.dedup();
            own.iter().filter(|w| has_word(&said, w)).count()
        })
        .collect()
}

/// Whether `said` (a message's [`words`]) has `word`, singular or plural ("posters" for
/// "poster", "mug" for "mugs").
fn has_word(said: &[String], word: &str) -> bool {
    said.iter().any(|w| w == word || w.strip_suffix('s') == Some(word) || word.strip_suffix('s') == Some(w))
}

/// Whether a piece of `sources` that mentions one of `with` (a call's other values: the event
/// `c3`) also mentions `value` ([`pieces`]): "Friday" in "Move the Friday lunch to 2pm" is what
/// the app shows of `c3` (on Friday), not a change asked for.
pub(crate) fn shown_with(sources: &[Value], with: &[&str], value: &str) -> bool {
    let mut found = Vec::new();
    for source in sources {
        for other in with {
            pieces(source, other, &mut found);
        }
    }
    found.iter().any(|piece| mentions(piece, value))
}

/// The names `message` uses that `shown` (the lowercase text of everything the app showed:
/// [`shown_text`](crate::made_up::shown_text)) does not have, as the message writes them: words
/// of three letters or more that begin with a capital and go on in lowercase ("Dave", not "ASAP"
/// or "T-shirt") and do not open a line, a sentence, a quotation or what follows a colon. A name the user
/// uses that the app has nowhere cannot be what a call picks from the app's list: "Archive the
/// email from Dave." when no email is from a Dave.
pub fn unknown_names(message: &str, shown: &str) -> Vec<String> {
    let known: HashSet<String> = crate::claims::plain_words(shown).into_iter().collect();
    let mut names = Vec::new();
    let mut opening = true;
    for (line_start, token) in message.lines().flat_map(|line| line.split_whitespace().enumerate()) {
        opening |= line_start == 0;
        let starts_quote = token.starts_with(['"', '\'', '“', '‘', '(', '«']);
        let word = token.trim_matches(|c: char| !c.is_alphanumeric());
        let word = word.strip_suffix("'s").or_else(|| word.strip_suffix("’s")).unwrap_or(word);
        let mut chars = word.chars();
        let is_name = chars.next().is_some_and(char::is_uppercase)
            && word.chars().count() >= 3
            && word.chars().all(char::is_alphabetic)
            && chars.any(char::is_lowercase);
        if is_name && !opening && !starts_quote {
            let lower = word.to_lowercase();
            let plural = lower.strip_suffix('s').map(str::to_string);
            if !known.contains(&lower)
                && !plural.is_some_and(|p| known.contains(&p))
                && !names.iter().any(|n: &String| n.to_lowercase() == lower)
            {
                names.push(word.to_string());
            }
        }
        opening = token.ends_with(['.', '!', '?', ':']) || (starts_quote && word.is_empty());
    }
    names
}

/// A clock time written in `text`: the minutes after midnight it may stand for (one for "6am",
/// "18:30" or "6:30 pm"; two for "6:30", morning or evening), with the words as written.
/// "6am", "6 pm", "6 p.m.", "08:10" and "8:10" are times; a bare "6" is not.
fn clock_times(text: &str) -> Vec<(String, Vec<u32>)> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let digits_at = |from: usize| chars[from..].iter().take_while(|(_, c)| c.is_ascii_digit()).count();
    let mut times = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let run = digits_at(at);
        let starts_word = at == 0 || !chars[at - 1].1.is_alphanumeric();
        if run == 0 || !starts_word {
            at += run.max(1);
            continue;
        }
        let start = chars[at].0;
        let hour: u32 = text[start..start + run].parse().unwrap_or(99);
        let mut end = at + run;
        let mut minutes = None;
        if run <= 2 && chars.get(end).is_some_and(|(_, c)| *c == ':') && digits_at(end + 1) == 2 {
            minutes = text[chars[end + 1].0..chars[end + 1].0 + 2].parse::<u32>().ok();
            end += 3;
        }
        // "am"/"pm", "a.m."/"p.m.", after one space at most, and not the start of a longer word.
        let mut look = end;
        if chars.get(look).is_some_and(|(_, c)| *c == ' ') {
            look += 1;
        }
        let rest: String = chars[look.min(chars.len())..].iter().take(4).map(|(_, c)| c.to_ascii_lowercase()).collect();
        let half = ["a.m.", "p.m.", "am", "pm"]
            .into_iter()
            .find(|h| rest.starts_with(h) && !chars.get(look + h.len()).is_some_and(|(_, c)| c.is_alphanumeric()));
        if let Some(half) = half {
            end = look + half.len();
        }
        let after_ok = !chars.get(end).is_some_and(|(_, c)| c.is_ascii_digit());
        let stands_for = match (half, minutes) {
            (Some(half), m) if (1..=12).contains(&hour) && run <= 2 && m.is_none_or(|m| m < 60) => {
                let hour = hour % 12 + if half.starts_with('p') { 12 } else { 0 };
                vec![hour * 60 + m.unwrap_or(0)]
            }
            (None, Some(m)) if hour < 24 && m < 60 => {
                let mut both = vec![hour * 60 + m];
                if (1..12).contains(&hour) {
                    both.push((hour + 12) * 60 + m);
                }
                both
            }
            _ => Vec::new(),
        };
        if after_ok && !stands_for.is_empty() {
            let written: String = chars[at..end].iter().map(|(_, c)| *c).collect();
            times.push((written, stands_for));
        }
        at = end.max(at + 1);
    }
    times
}

/// The clock times `message` speaks of ("the 6am train") that nothing the app showed (`shown`:
/// [`shown_text`](crate::made_up::shown_text)) has and that the call (`args`) does not give
/// either, as the message writes them. A time the user asks for is in the call ("Move it to
/// 4pm." → `"time": "16:00"`), and one the user picks something by is in the app ("my 3pm
/// meeting" where a meeting is at 15:00); a time in neither is something the app does not
/// have: "Book a seat on the 6am train" when the trains leave at 08:10 and 17:30.
pub fn unknown_times(message: &str, shown: &str, args: &Value) -> Vec<String> {
    let mut known: HashSet<u32> = clock_times(shown).into_iter().flat_map(|(_, at)| at).collect();
    let mut strings = Vec::new();
    collect_strings(args, &mut strings);
    known.extend(strings.iter().flat_map(|text| clock_times(text)).flat_map(|(_, at)| at));
    let mut unknown: Vec<String> = Vec::new();
    for (written, stands_for) in clock_times(message) {
        if !stands_for.iter().any(|at| known.contains(at)) && !unknown.contains(&written) {
            unknown.push(written);
        }
    }
    unknown
}

/// Every string in `value`, at any depth.
fn collect_strings<'a>(value: &'a Value, into: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => into.push(text),
        Value::Array(items) => items.iter().for_each(|item| collect_strings(item, into)),
        Value::Object(fields) => fields.values().for_each(|field| collect_strings(field, into)),
        _ => {}
    }
}

/// The entry of the app's data (`sources`: the app state's values) that a call's arguments
/// (`args`) only copy: an object, anywhere in the data, among whose own strings, numbers and
/// booleans is every value the call gives, two of them or more, none of them empty. Strings are
/// compared without case or the spaces around them. A call like that makes a second copy of
/// what the app has ("Invite Bob to the project review." → `add_event {"title": "Project review
/// with Bob", "day": "Thursday", "time": "11:00"}`, the review's own values) or sets an entry to
/// what it is already; it is found from the values alone, whatever the app and the message's
/// words.
pub(crate) fn copied_entry<'a>(args: &Value, sources: &'a [Value]) -> Option<&'a serde_json::Map<String, Value>> {
    let given = args.as_object()?;
    if given.len() < 2 {
        return None;
    }
    let same = |a: &Value, b: &Value| match (a, b) {
        (Value::String(a), Value::String(b)) => !a.trim().is_empty() && a.trim().eq_ignore_ascii_case(b.trim()),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Bool(a), Value::Bool(b)) => a == b,
        _ => false,
    };
    fn find<'a>(
        value: &'a Value,
        copies: &dyn Fn(&serde_json::Map<String, Value>) -> bool,
    ) -> Option<&'a serde_json::Map<String, Value>> {
        match value {
            Value::Object(fields) if copies(fields) => Some(fields),
            Value::Object(fields) => fields.values().find_map(|field| find(field, copies)),
            Value::Array(items) => items.iter().find_map(|item| find(item, copies)),
            _ => None,
        }
    }
    let copies = |fields: &serde_json::Map<String, Value>| {
        given.values().all(|arg| fields.values().any(|field| same(arg, field)))
    };
    sources.iter().find_map(|source| find(source, &copies))
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

    #[test]
    fn a_call_that_gives_only_an_entrys_own_values_copies_it() {
        let calendar = vec![json!({"events": [
            {"id": "c1", "title": "Team standup", "day": "Monday", "time": "09:00"},
            {"id": "c4", "title": "Project review with Bob", "day": "Thursday", "time": "11:00", "seats": 4},
        ]})];
        let copy = json!({"title": " project review with bob", "day": "Thursday", "time": "11:00"});
        assert_eq!(copied_entry(&copy, &calendar).map(|e| e["id"].clone()), Some(json!("c4")));
        // Numbers compare as numbers; an id and another value of the same entry copy it too.
        assert!(copied_entry(&json!({"id": "c4", "seats": 4.0}), &calendar).is_some());
        // One value of its own: a new entry.
        assert!(copied_entry(&json!({"title": "Gym", "day": "Thursday", "time": "11:00"}), &calendar).is_none());
        // Values of two entries together copy neither.
        assert!(copied_entry(&json!({"title": "Team standup", "day": "Thursday"}), &calendar).is_none());
        // One value alone, an empty one, or one that is not a string, number or boolean is too
        // little to tell.
        assert!(copied_entry(&json!({"title": "Team standup"}), &calendar).is_none());
        assert!(copied_entry(&json!({"title": "", "day": "Monday"}), &calendar).is_none());
        assert!(copied_entry(&json!({"title": ["Team standup"], "day": "Monday"}), &calendar).is_none());
        assert!(copied_entry(&json!("c4"), &calendar).is_none());
        // Text the app shows is not an entry.
        assert!(copied_entry(&copy, &[json!("Project review with Bob, Thursday, 11:00")]).is_none());
    }

    const IDS: [&str; 4] = ["e1", "e2", "e3", "e4"];
    const TOOL: &str = "archive_email Move an email out of the inbox into the archive.";

    #[test]
    fn a_message_points_at_the_entry_whose_own_words_it_uses() {
        let grounded = |message: &str| grounded_values(message, &IDS, &inbox(), TOOL).said;
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
        assert_eq!(grounded_values("Add the Milky Way one.", &allowed, &products, "cart_add").said, [0, 2]);
        assert_eq!(grounded_values("Add the ceramic one.", &allowed, &products, "cart_add").said, [1, 0]);
        let result = vec![json!("Trains: Train 412 dep 08:10 morning; Train 418 dep 17:30 evening")];
        assert_eq!(grounded_values("the evening one", &["412", "418"], &result, "book_ticket").said, [0, 1]);
    }

    #[test]
    fn a_value_is_described_when_the_data_has_words_only_its_pieces_have() {
        assert_eq!(grounded_values("Archive it.", &IDS, &inbox(), TOOL).described, [true; 4]);
        // Both fares on each line: nothing tells "first" from "tourist".
        let fares = vec![json!(
            "Train 412 dep 08:10, first 95000 ARS, tourist 41000 ARS; Train 418 dep 17:30, first 99000 ARS, tourist 43000 ARS"
        )];
        let fare = grounded_values("a tourist seat", &["first", "tourist"], &fares, "book_ticket");
        assert_eq!(
            fare,
            Grounding { said: vec![0, 0], described: vec![false; 2] },
            "\"tourist\" is not a word of first's"
        );
        // No data about the values at all.
        assert_eq!(grounded_values("Add a mug.", &["mug-red", "mug-blue"], &[], "cart_add").described, [false; 2]);
    }

    #[test]
    fn names_the_app_shows_nowhere_are_unknown() {
        let shown = inbox()[0].to_string().to_lowercase();
        let unknown = |message: &str| unknown_names(message, &shown);
        assert_eq!(unknown("Archive the email from Dave."), ["Dave"]);
        assert_eq!(unknown("Archive Dave's email, and Dave's reply."), ["Dave"], "once, without the possessive");
        // Names the inbox has, in any case or with a plural; words that open a sentence, a
        // quotation or what follows a colon; acronyms and words with other signs.
        for known in [
            "Archive Carla's message.",
            "Tell ana that Friday works.",
            "Delete the Invoices from Bob Chen.",
            "Archive it. Thanks!",
            "Reply to Ana: Sounds good.",
            "Reply to Ana\nSounds good",
            "Reply \"Great work\" to Carla.",
            "Archive the oldest email ASAP.",
            "Buy me a large black T-shirt.",
            "I want to archive everything.",
        ] {
            assert_eq!(unknown(known), Vec::<String>::new(), "{known}");
        }
    }

    #[test]
    fn clock_times_are_read_in_their_usual_forms_and_numbers_are_not() {
        let read = clock_times;
        assert_eq!(read("the 6am train"), [("6am".to_string(), vec![360])]);
        assert_eq!(read("at 6 PM, or 12am"), [("6 PM".to_string(), vec![1080]), ("12am".to_string(), vec![0])]);
        assert_eq!(
            read("dep 08:10, 17:30"),
            [("08:10".to_string(), vec![490, 1210]), ("17:30".to_string(), vec![1050])]
        );
        assert_eq!(read("6:30 p.m."), [("6:30 p.m.".to_string(), vec![1110])]);
        for none in ["train 412", "41000 ARS", "3 seats", "2026-12-07", "room 6a", "13pm", "10:75", "v1:20x"] {
            assert!(read(none).is_empty(), "{none}: {:?}", read(none));
        }
    }

    #[test]
    fn a_time_the_message_speaks_of_is_unknown_unless_the_app_shows_it_or_the_call_gives_it() {
        let shown = "train 412 dep 08:10, first 95000 ars; train 418 dep 17:30";
        assert_eq!(unknown_times("Book a seat on the 6am train.", shown, &json!({"train": 412})), ["6am"]);
        assert!(unknown_times("Book a seat on the 8:10 train.", shown, &json!({"train": 412})).is_empty());
        assert!(unknown_times("The 5:30 pm train, please.", shown, &json!({"train": 418})).is_empty());
        assert!(unknown_times("Move it to 4pm.", shown, &json!({"time": "16:00"})).is_empty());
        assert!(unknown_times("Put a haircut on Saturday at 10am.", "", &json!({"time": "10:00"})).is_empty());
        assert!(unknown_times("Book the evening train.", shown, &json!({"train": 418})).is_empty());
    }

    #[test]
    fn a_values_own_words_name_it_singular_or_plural() {
        let allowed = ["tee-black", "mug-red", "mug-blue", "poster-space"];
        assert_eq!(named_values("How much would three space posters cost?", &allowed), [0, 0, 0, 2]);
        assert_eq!(named_values("How much is a mug?", &allowed), [0, 1, 1, 0]);
        assert_eq!(named_values("What did Carla send me?", &["e3", "e4"]), [0, 0], "ids have no words");
    }
}
