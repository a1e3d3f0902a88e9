//! Durable sessions through the real `tether serve` binary and a real SQLite file: a server
//! killed with SIGKILL while a tool call waits for the user (the approval dialog open) and
//! started again on the same file resumes the session, takes the result once and finishes the
//! run; a page that reloaded gets the conversation back (`HISTORY`); a deploy (SIGTERM) drains:
//! every client is told to reconnect (1012) and the run goes on in the next process; a wrong
//! token never resumes a stored session; the user's Stop ends a run as `aborted` and cancels its
//! call in the page; a long conversation is written as patches that do not grow with it, and read
//! back whole.

mod common;

use common::serve::{Serve, Served};
use serde_json::json;
use tether_protocol::{ClientFrame, HistoryRole, ResultStatus, Resume, RunStatus, ServerFrame, StopRun, UserMessage};

type Dir = common::dir::TestDir;

fn serve(dir: &Dir) -> Served {
    Serve::new().args(["--store", &dir.sqlite_store()]).start()
}

/// The number of a server frame id (`s<n>`).
fn seq(id: &str) -> u64 {
    id.trim_start_matches('s').parse().expect("a numbered frame")
}

/// A page that reloaded: it resumes the session (the conversation asked for) and gets it.
async fn reloaded(served: &Served, resume: Resume) -> (common::Client, tether_protocol::History) {
    let mut page = common::Client::connect(&served.url()).await;
    assert!(page.hello(Some(resume)).await.resumed);
    let history = page
        .recv_until(|frame| match frame {
            ServerFrame::History(history) => Some(history.clone()),
            _ => None,
        })
        .await;
    (page, history)
}

/// A client with the storefront's tools that asked for the red mug and holds its `cart_add`
/// call unanswered (as a page does while its approval dialog is open).
async fn waiting_call(served: &Served) -> (common::Client, tether_protocol::ToolCall) {
    let mut client = common::Client::connect(&served.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    client.say("add the red mug to my cart").await;
    let call = client.tool_call().await;
    assert_eq!((call.name.as_str(), &call.args), ("cart_add", &json!({"productId": "mug-red"})));
    (client, call)
}

#[tokio::test]
async fn a_server_killed_during_an_approval_resumes_the_session_and_finishes_the_run_once() {
    let dir = Dir::new("durable-kill");
    let first = serve(&dir);
    let (client, call) = waiting_call(&first).await;
    let resume = Resume { last_seq: Some(seq(&call.id)), ..client.resume_info() };
    first.kill();
    client.kill();

    let second = serve(&dir);
    let mut client = common::Client::connect(&second.url()).await;
    let welcome = client.hello(Some(resume.clone())).await;
    assert!(welcome.resumed, "the session came back from the store");
    assert_eq!(welcome.session_id, resume.session_id);
    // The user approves now: the result is the first for this call, not an unknown one.
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug; cart: 1 item")).await;
    assert!(client.ack_or_error(&call.call_id).await.is_ok(), "the restarted server knows the call");
    let mut answer = String::new();
    let status = client
        .recv_until(|frame| match frame {
            ServerFrame::AgentMessage(message) => {
                assert_eq!(message.run_id, call.run_id, "the same run goes on");
                answer.push_str(&message.delta);
                message.done.then_some(message.status)
            }
            ServerFrame::ToolCall(again) => {
                assert_eq!(again.call_id, call.call_id, "no new call: the handler must not run twice");
                None
            }
            _ => None,
        })
        .await;
    assert_eq!(status, Some(RunStatus::Completed), "answer: {answer}");
    assert!(!answer.is_empty());
    // The same result sent again (the page resends what it is unsure of) is acknowledged, once.
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug; cart: 1 item")).await;
    assert!(client.ack_or_error(&call.call_id).await.is_ok());
    assert_eq!(second.health().await["stats"]["resultsApplied"], json!(1));
    assert_eq!(second.health().await["stats"]["resultsDuplicate"], json!(1));
}

#[tokio::test]
async fn a_message_sent_again_after_a_restart_is_not_run_twice() {
    let dir = Dir::new("durable-message-again");
    let first = serve(&dir);
    let mut client = common::Client::connect(&first.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    let message = ClientFrame::UserMessage(UserMessage { id: client.id(), text: "add the red mug to my cart".into() });
    client.send(message.clone()).await;
    let call = client.tool_call().await;
    let resume = Resume { last_seq: Some(seq(&call.id)), ..client.resume_info() };
    first.kill();
    client.kill();

    // The page could not tell whether the message arrived: it sends it again after the welcome.
    let second = serve(&dir);
    let mut client = common::Client::connect(&second.url()).await;
    assert!(client.hello(Some(resume)).await.resumed);
    client.send(message.clone()).await;
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug; cart: 1 item")).await;
    let mut runs = Vec::new();
    let mut until_done = |client_frame: &ServerFrame| match client_frame {
        ServerFrame::Error(error) => panic!("the message sent again was refused or run: {error:?}"),
        ServerFrame::AgentMessage(m) => {
            if !runs.contains(&m.run_id) {
                runs.push(m.run_id.clone());
            }
            m.done.then_some(m.status)
        }
        _ => None,
    };
    assert_eq!(client.recv_until(&mut until_done).await, Some(RunStatus::Completed));
    assert_eq!(runs, vec![call.run_id.clone()], "one run: the first reading's");
    // Once more after the end: still ignored. The next message is the next run, and nothing
    // came between.
    client.send(message).await;
    client.say("open the cart").await;
    match client.recv().await {
        ServerFrame::Event(event) => match event.event {
            tether_protocol::RunEvent::RunStart(start) => assert_eq!(start.text, "open the cart"),
            other => panic!("expected the next run's start, got {other:?}"),
        },
        other => panic!("expected the next run's start, got {other:?}"),
    }
}

#[tokio::test]
async fn a_reloaded_page_gets_the_conversation_back_after_a_restart() {
    let dir = Dir::new("durable-history");
    let first = serve(&dir);
    let (mut client, call) = waiting_call(&first).await;
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug; cart: 1 item")).await;
    let (answer, status) = client.answer().await;
    assert_eq!(status, RunStatus::Completed);
    let resume = Resume { history: true, ..client.resume_info() };
    client.kill();
    first.kill();

    let second = serve(&dir);
    let (mut page, history) = reloaded(&second, resume).await;
    let lines: Vec<(HistoryRole, &str, Option<RunStatus>)> =
        history.lines.iter().map(|line| (line.role, line.text.as_str(), line.status)).collect();
    assert_eq!(
        lines,
        vec![
            (HistoryRole::User, "add the red mug to my cart", None),
            (HistoryRole::Agent, answer.as_str(), Some(RunStatus::Completed)),
        ]
    );
    // The conversation goes on where it was: the model reads the earlier turn.
    page.context(2, common::storefront_tools()).await;
    page.say("add the red mug to my cart").await;
    let again = page.tool_call().await;
    assert_ne!(again.call_id, call.call_id, "a new call, numbered after the old ones");
    assert_ne!(again.run_id, call.run_id);
}

#[tokio::test]
async fn a_deploy_drains_clients_reconnect_and_the_run_goes_on_in_the_next_process() {
    let dir = Dir::new("durable-drain");
    let first = serve(&dir);
    let (mut client, call) = waiting_call(&first).await;
    let resume = Resume { last_seq: Some(seq(&call.id)), ..client.resume_info() };
    let exit = std::thread::spawn(move || first.terminate());
    let (code, reason) = client.closed().await;
    assert_eq!(code, 1012, "{reason}");
    client.kill();
    assert!(exit.join().unwrap().success(), "a drained server exits cleanly");

    let second = serve(&dir);
    let mut client = common::Client::connect(&second.url()).await;
    assert!(client.hello(Some(resume)).await.resumed);
    client.result(&call.call_id, ResultStatus::Ok, json!("added 1 x Red mug; cart: 1 item")).await;
    let (_, status) = client.answer().await;
    assert_eq!(status, RunStatus::Completed);
}

#[tokio::test]
async fn a_wrong_token_never_resumes_a_stored_session() {
    let dir = Dir::new("durable-token");
    let first = serve(&dir);
    let (client, _) = waiting_call(&first).await;
    let resume = client.resume_info();
    first.kill();

    let second = serve(&dir);
    let mut thief = common::Client::connect(&second.url()).await;
    let guess = Resume { token: "0".repeat(32), ..resume.clone() };
    let welcome = thief.hello(Some(guess)).await;
    assert!(!welcome.resumed);
    assert_ne!(welcome.session_id, resume.session_id);
    // The owner still can.
    let mut owner = common::Client::connect(&second.url()).await;
    assert!(owner.hello(Some(resume)).await.resumed);
}

#[tokio::test]
async fn stop_ends_the_run_as_aborted_and_cancels_its_call_in_the_page() {
    let dir = Dir::new("durable-stop");
    let served = serve(&dir);
    let (mut client, call) = waiting_call(&served).await;
    let id = client.id();
    client.send(ClientFrame::StopRun(StopRun { id, run_id: Some(call.run_id.clone()) })).await;
    let mut cancelled = false;
    let status = client
        .recv_until(|frame| match frame {
            ServerFrame::ToolCancel(cancel) => {
                cancelled |= cancel.call_id == call.call_id;
                None
            }
            ServerFrame::AgentMessage(message) if message.done => Some(message.status),
            _ => None,
        })
        .await;
    assert_eq!(status, Some(RunStatus::Aborted));
    assert!(cancelled, "the page is told to abort the call");
    // The session takes a new message at once.
    client.say("add the red mug to my cart").await;
    assert_ne!(client.tool_call().await.call_id, call.call_id);
}

/// What the SQLite file holds of session `id`, read by the test itself (the server is gone): its
/// patches' sizes, in order, and the whole state.
fn stored(dir: &Dir, id: &str) -> (Vec<usize>, serde_json::Value) {
    let connection = rusqlite::Connection::open(dir.file("sessions.db")).unwrap();
    let mut statement = connection.prepare("SELECT length(text) FROM patches WHERE session = ?1 ORDER BY n").unwrap();
    let sizes = statement.query_map([id], |row| row.get::<_, i64>(0)).unwrap().map(|n| n.unwrap() as usize).collect();
    let state: String =
        connection.query_row("SELECT text FROM states WHERE session = ?1", [id], |row| row.get(0)).unwrap();
    (sizes, serde_json::from_str(&state).unwrap())
}

fn median(sizes: &[usize]) -> usize {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

#[tokio::test]
async fn a_long_conversation_is_written_in_patches_that_do_not_grow_and_is_read_back_whole() {
    let dir = Dir::new("durable-patches");
    let first = serve(&dir);
    let mut client = common::Client::connect(&first.url()).await;
    client.hello(None).await;
    client.context(1, common::storefront_tools()).await;
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(common::add_the_red_mug(&mut client).await);
    }
    let resume = Resume { history: true, ..client.resume_info() };
    client.kill();
    first.kill();
    let (early, _) = stored(&dir, &resume.session_id);
    assert!(!early.is_empty(), "the writes after the first are patches");

    // Started again on the same file: the session is read back (state and patches) and goes on.
    let second = serve(&dir);
    let mut client = common::Client::connect(&second.url()).await;
    assert!(client.hello(Some(resume.clone())).await.resumed);
    client.context(2, common::storefront_tools()).await;
    for _ in 0..60 {
        answers.push(common::add_the_red_mug(&mut client).await);
    }
    client.kill();
    second.kill();
    let (late, state) = stored(&dir, &resume.session_id);
    // The conversation grew sixteenfold; a write did not.
    assert!(
        median(&late) * 2 <= median(&early) * 3,
        "patch sizes grew with the conversation: median {} bytes after 4 runs, {} after 64",
        median(&early),
        median(&late)
    );
    assert!(state["patched"].as_u64().unwrap() > 0, "written whole again after patches: {}", state["patched"]);

    // Read back a third time: the whole conversation, in order.
    let third = serve(&dir);
    let (mut page, history) = reloaded(&third, resume).await;
    let expected: Vec<(HistoryRole, &str)> = answers
        .iter()
        .flat_map(|answer| [(HistoryRole::User, "add the red mug to my cart"), (HistoryRole::Agent, answer.as_str())])
        .collect();
    let lines: Vec<(HistoryRole, &str)> = history.lines.iter().map(|line| (line.role, line.text.as_str())).collect();
    assert_eq!(lines, expected);
    // And the model's conversation goes on from it.
    page.context(3, common::storefront_tools()).await;
    common::add_the_red_mug(&mut page).await;
}
