//! The failure classes of the issue "the agent must act right in any app", each with replies the
//! real 1.5B model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama.cpp, temperature 0) gave to the
//! requests as Tether now sends them, recorded in `fixtures/model-replies/` and replayed here:
//!
//! - a claim without a call, in several wordings: the reply names its step first, and the step is
//!   the tool (with the earlier shape the same model answered "Item 'buy milk' added to the to-do
//!   list." and added nothing);
//! - a forced substitute: on a page whose tool allows only the red mug, a request for a poster
//!   names the poster (the grammar no longer narrows the values), which validation then refuses;
//! - an empty list: the tool whose argument allows nothing now stays nameable and says so, and
//!   the model names it instead of calling another tool;
//! - a stop halfway: after the first of two asked actions, the next reply does the second.
//!
//! (A context overflow is in `context_window.rs`.) `TETHER_RECORD_MODEL=http://127.0.0.1:PORT`
//! records them again from a model server (../shared/real-model/README.md).

mod recorded;

use recorded::{call_of, replay_or_record, request, storefront_home, todo_tools};
use serde_json::json;
use tether_agent::*;
use tether_core::validate::{CompiledSchema, FullValidator, Validator, format_validation_errors};
use tether_protocol::{ContextEntry, ResultStatus, ToolSpec};

/// The to-do list as the loop shows it, right before the request.
fn todo_state(items: &[&str]) -> ChatMessage {
    let entries = [ContextEntry { key: "todos".into(), description: "The to-do list".into(), value: json!(items) }];
    ChatMessage::note(NoteKind::AppState, context_message(&entries).unwrap())
}

/// The items on the list, the request, and the call it needs (tool, words of its title), if any.
type Case = (&'static [&'static str], &'static str, Option<(&'static str, &'static str)>);

#[tokio::test]
async fn a_request_for_an_action_becomes_the_call_in_any_wording_and_a_question_an_answer() {
    let cases: [Case; 6] = [
        (&[], "Add 'buy milk' to my list.", Some(("todo_add", "buy milk"))),
        (&["buy milk"], "Also add 'call dentist'.", Some(("todo_add", "call dentist"))),
        (&["buy milk"], "I need to pick up the kids at 5, note that down.", Some(("todo_add", "kids"))),
        (&["buy milk", "call dentist"], "Remove 'call dentist' from the list.", Some(("todo_remove", "call dentist"))),
        (&["buy milk"], "Done with the milk, cross it off.", Some(("todo_remove", "milk"))),
        (&["buy milk", "call dentist"], "What's on my list?", None),
    ];
    let mock = replay_or_record("failure_claim_any_wording").await;
    for (items, say, expected) in cases {
        let tools = todo_tools(items);
        let reply =
            mock.complete(&request(vec![todo_state(items), ChatMessage::User { content: say.into() }], tools)).await;
        match expected {
            Some((tool, words)) => {
                let (name, args) =
                    call_of(&reply).unwrap_or_else(|| panic!("{say:?}: no call, answered {:?}", reply.text));
                assert_eq!(name, tool, "{say:?}");
                assert!(args["title"].as_str().unwrap_or_default().contains(words), "{say:?}: {args}");
                assert!(reply.text.is_empty(), "{say:?}: the call came with words: {:?}", reply.text);
            }
            None => {
                assert!(reply.tool_calls.is_empty(), "{say:?}: {:?}", reply.tool_calls);
                assert!(reply.text.contains("buy milk") && reply.text.contains("call dentist"), "{}", reply.text);
            }
        }
    }
}

/// The red mug's page: `cart_add` takes only the red mug there.
fn mug_page() -> Vec<ToolSpec> {
    vec![ToolSpec::new("cart_add", "Add a product to the shopping cart.").with_parameters(json!({"type": "object", "properties": {"productId": {"type": "string", "enum": ["mug-red"]}, "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}}, "required": ["productId"], "additionalProperties": false}))]
}

#[tokio::test]
async fn a_value_the_page_does_not_allow_is_named_not_substituted_and_validation_refuses_it() {
    let mock = replay_or_record("failure_forced_substitute").await;
    let tools = mug_page();
    let asked = vec![ChatMessage::User { content: "Add one space poster to my cart.".into() }];
    let reply = mock.complete(&request(asked, tools.clone())).await;
    let (name, args) = call_of(&reply).expect("a call");
    assert_eq!(name, "cart_add");
    assert_ne!(args["productId"], "mug-red", "the product the page allowed, not the one asked for");
    assert!(args["productId"].as_str().unwrap().contains("poster"), "{args}");
    // The grammar sent allowed it; Tether's validation refuses it with the values this page takes.
    let schema = &mock.sent(0)["response_format"]["json_schema"]["schema"]["anyOf"][0]["properties"]["arguments"];
    assert_eq!(schema["properties"]["productId"], json!({"type": "string"}));
    let errors = FullValidator.compile(&tools[0].parameters).unwrap().errors(&args);
    let message = format_validation_errors("cart_add", &errors);
    assert!(message.contains("is not one of") && message.contains("mug-red"), "{message}");
}

#[tokio::test]
async fn a_tool_whose_list_is_empty_stays_nameable_and_says_so() {
    let mock = replay_or_record("failure_empty_enum").await;
    let tools = todo_tools(&[]);
    assert_eq!(tools[1].parameters["properties"]["title"]["enum"], json!([]));
    let asked = vec![todo_state(&[]), ChatMessage::User { content: "Remove 'buy milk' from my list.".into() }];
    let reply = mock.complete(&request(asked, tools.clone())).await;
    // The prompt lists it as allowing nothing, not as `any`.
    let listed = mock.sent(0)["messages"].to_string();
    assert!(listed.contains("todo_remove(title: (no value allowed now))"), "{listed}");
    // The model names the tool the user meant (with only `todo_add` to name, it called that),
    // and the call is refused with words that say why.
    let (name, args) = call_of(&reply).expect("a call");
    assert_eq!(name, "todo_remove", "not another tool in its place");
    let errors = FullValidator.compile(&tools[1].parameters).unwrap().errors(&args);
    assert!(
        format_validation_errors("todo_remove", &errors)
            .ends_with("no value is allowed now (the list of allowed values is empty)")
    );
}

#[tokio::test]
async fn after_the_first_of_two_asked_actions_the_next_reply_does_the_second() {
    let mock = replay_or_record("failure_stop_halfway").await;
    let tools = storefront_home();
    let say = "Add one blue mug and one red mug to the cart.";
    let first = ModelToolCall {
        id: "r1.1.0".into(),
        name: "cart_add".into(),
        arguments: json!({"productId": "mug-blue", "quantity": 1}),
    };
    let messages = request(
        vec![
            ChatMessage::User { content: say.into() },
            ChatMessage::Assistant {
                content: "{\"next\": \"cart_add\", \"arguments\": {\"productId\": \"mug-blue\", \"quantity\": 1}}"
                    .into(),
                tool_calls: vec![first],
            },
            ChatMessage::tool(
                "r1.1.0",
                "cart_add",
                ResultStatus::Ok,
                "added 1 × Blue mug; cart: 1 item (1 × Blue mug)",
            ),
        ],
        tools,
    );
    let reply = mock.complete(&messages).await;
    let (name, args) = call_of(&reply).unwrap_or_else(|| panic!("stopped halfway: {:?}", reply.text));
    assert_eq!((name.as_str(), &args["productId"]), ("cart_add", &json!("mug-red")));
}

#[tokio::test]
async fn a_questions_run_answers_from_its_read_result_even_after_a_repeat_and_when_an_entry_went_away() {
    // Measured with the 1.5B model in the storefront's long conversations: "What's in my cart?",
    // after a `cart_view` that listed ten items (and opened the cart page, so the product page's
    // entry went away), was answered "The cart is empty." or called `cart_view` again. The run is
    // a question's (`ChatRequest::question`), a gone entry is a sentence, and the loop guard's
    // refusal of the repeat is not one for good (`call_again`).
    let mock = replay_or_record("question_after_read").await;
    let mut tools = storefront_home();
    tools.push(ToolSpec::new("cart_view", "Show the items in the cart and the total."));
    let entry = |key: &str, description: &str, value: &str| ContextEntry {
        key: key.into(),
        description: description.into(),
        value: json!(value),
    };
    let cart = "10 items (4 × Space poster, 3 × Black T-shirt (M), 1 × Black T-shirt (L), 2 × Blue mug), total $164.00";
    let shown = [
        entry("page", "The page the user is on", "the page of Black T-shirt"),
        entry("cart", "The shopping cart", cart),
        entry("product", "The product on this page", "Black T-shirt (tee-black): $20.00. A black cotton T-shirt."),
    ];
    let now = [entry("page", "The page the user is on", "the cart page"), entry("cart", "The shopping cart", cart)];
    let result = "(Opened the page /cart first: cart_view is there.) cart: 10 items (4 × Space poster, 3 × Black \
                  T-shirt (M), 1 × Black T-shirt (L), 2 × Blue mug); total $164.00\n(The app's tools changed. \
                  Tools now: navigate, product_view, cart_add, cart_view.)";
    let view = |id: &str| ChatMessage::Assistant {
        content: "{\"next\": \"cart_view\", \"arguments\": {}}".into(),
        tool_calls: vec![ModelToolCall { id: id.into(), name: "cart_view".into(), arguments: json!({}) }],
    };
    let changes = context_changes(&shown, &now).unwrap();
    assert!(
        changes.ends_with("\n- The page the user is on: the cart page\n- (The product on this page is not shown now.)")
    );
    let changed = ChatMessage::note(NoteKind::AppStateChanged, changes);
    let asked = |rest: Vec<ChatMessage>| {
        let mut messages = vec![
            ChatMessage::note(NoteKind::AppState, context_message(&shown).unwrap()),
            ChatMessage::User { content: "What's in my cart?".into() },
            view("r1.1.0"),
            ChatMessage::tool("r1.1.0", "cart_view", ResultStatus::Ok, result),
        ];
        messages.extend(rest);
        messages.push(changed.clone());
        ChatRequest { question: true, ..request(messages, tools.clone()) }
    };
    let repeat = ChatMessage::Tool {
        call_id: "r1.2.0".into(),
        name: "cart_view".into(),
        status: ResultStatus::Denied,
        call_again: true,
        content: format!(
            "[denied] Not run again: cart_view was already called with these arguments in this request. Its \
             result then: {result} Do not repeat it: answer the user, or call something else."
        ),
    };
    for (n, request) in [asked(vec![]), asked(vec![view("r1.2.0"), repeat])].iter().enumerate() {
        let reply = mock.complete(request).await;
        assert!(reply.tool_calls.is_empty(), "{n}: called {:?}", reply.tool_calls);
        assert!(reply.text.contains("10") && reply.text.contains("poster"), "{n}: {}", reply.text);
    }
}
