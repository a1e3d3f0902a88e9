//! The Tether demo storefront in Leptos (CSR): every page's components declare the tools the
//! agent may use there (see `docs/storefront.md`), and a chat panel drives them.

mod shop;

use leptos::prelude::*;
use serde_json::{Value, json};
use tether_leptos::{
    AgentProvider, ApprovalDialog, ChatPanel, McpPairing, Risk, ToolCallView, ToolDef, ToolInspector, use_agent,
    use_agent_context, use_agent_tool, use_agent_tool_reactive, use_tool_call_renderer, use_webmcp,
};
use wasm_bindgen::prelude::*;

use shop::{Backend, PRODUCTS, Route, SIZE_GUIDE, Shop, price, product, product_line};

/// The server's WebSocket endpoint on the same origin as the page.
fn server_url() -> String {
    let location = web_sys::window().expect("a browser window").location();
    let scheme = if location.protocol().unwrap_or_default() == "https:" { "wss" } else { "ws" };
    format!("{scheme}://{}/ws", location.host().unwrap_or_default())
}

/// Mounts the shop on the page.
#[wasm_bindgen(start)]
pub fn start() {
    let path = web_sys::window().and_then(|window| window.location().pathname().ok());
    if path.as_deref() == Some("/outside-provider") {
        // For the end-to-end suite: a hook outside the provider, in the size-optimised build.
        mount_to_body(OutsideProvider);
        return;
    }
    mount_to_body(App);
}

/// A component whose hook has no provider around it: the app aborts, after logging why.
#[component]
fn OutsideProvider() -> impl IntoView {
    use_agent_tool(ToolDef::new("orphan_tool", "Registered outside any provider."), |_| async { Ok(Value::Null) });
    view! { <p>"Not reached."</p> }
}

/// The whole app: the agent provider around the shop.
#[component]
pub fn App() -> impl IntoView {
    let shop = Shop::new();
    provide_context(shop);
    view! {
        <AgentProvider url=server_url()>
            <Layout/>
        </AgentProvider>
    }
}

fn ids_enum() -> Value {
    json!(PRODUCTS.iter().map(|p| p.id).collect::<Vec<_>>())
}

fn quantity_schema() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": 10, "default": 1})
}

fn size_schema() -> Value {
    json!({"type": "string", "enum": ["S", "M", "L"], "description": "For a product that comes in sizes (the T-shirt); left out, the user is asked."})
}

/// `cart_add`, on the home page (`ids`: every product) and on a product's page (`ids`: that
/// one): a product that comes in sizes, added without one, makes the handler ask the user which
/// (the question is drawn in the chat by [`cart_summary`]).
fn use_cart_add(ids: &Value) {
    let shop = expect_context::<Shop>();
    let agent = use_agent();
    use_agent_tool(
        ToolDef::new("cart_add", "Add a product to the shopping cart.").parameters(json!({
            "type": "object",
            "properties": {"productId": {"type": "string", "enum": ids}, "quantity": quantity_schema(), "size": size_schema()},
            "required": ["productId"],
            "additionalProperties": false
        })),
        move |args| {
            // Asked before the handler's first await (see `AgentContext::ask`).
            let question = Shop::size_question(&args).map(|question| agent.ask("cart_add", question));
            async move {
                let answer = match question {
                    Some(question) => Some(question.await?),
                    None => None,
                };
                shop.add_from_args(&args, answer.as_ref())
            }
        },
    );
}

/// What `navigate` and `open_cart` return: which page is open now, in words.
fn page_opened(shop: &Shop, to: &str) -> String {
    match to.strip_prefix("product/").and_then(product) {
        Some(p) => format!("opened the page of {} ({})", p.name, price(p.price)),
        None if to == "cart" => format!("opened the cart page; cart: {}", shop.cart_summary()),
        None => format!("opened the {to} page"),
    }
}

/// `product_view` in the chat: the product's card.
fn product_card(call: &ToolCallView) -> impl IntoView + use<> {
    let found = call.args["productId"].as_str().and_then(product);
    let (name, cost) = found.map_or(("a product".to_string(), String::new()), |p| (p.name.to_string(), price(p.price)));
    view! {
        <div class="tool-card product-card" data-testid="product-card">
            <strong>{name}</strong>
            " "
            <span class="product-card-price">{cost}</span>
            <small>" · " {call.status.words()}</small>
        </div>
    }
}

/// The cart tools in the chat: what they do to the cart, in a line; while `cart_add` asks which
/// size, the sizes to choose from.
fn cart_summary(call: &ToolCallView) -> impl IntoView + use<> {
    if let (Some(question), Some(answer)) = (&call.question, call.respond) {
        let product = question["product"].as_str().unwrap_or("it").to_string();
        let sizes: Vec<String> =
            question["sizes"].as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect();
        return view! {
            <div class="tool-card cart-summary" data-testid="size-question">
                {format!("Which size of {product}? ")}
                {sizes
                    .into_iter()
                    .map(|size| {
                        let (chosen, label) = (size.clone(), size.clone());
                        view! {
                            <button data-testid="size-choice" data-size=size on:click=move |_| answer.respond(json!(chosen))>
                                {label}
                            </button>
                        }
                    })
                    .collect_view()}
            </div>
        }
        .into_any();
    }
    let name = call.args["productId"].as_str().and_then(product).map(|p| p.name).unwrap_or("");
    let quantity = call.args["quantity"].as_u64().unwrap_or(1);
    let size = call.args["size"].as_str().map(|size| format!(" (size {size})")).unwrap_or_default();
    let what = match call.tool.as_str() {
        "cart_add" => format!("Add {quantity} × {name}{size} to the cart"),
        "cart_remove" => format!("Remove {name} from the cart"),
        "cart_clear" => "Empty the cart".to_string(),
        _ => "Look at the cart".to_string(),
    };
    view! {
        <div class="tool-card cart-summary" data-testid="cart-summary">
            {what}
            <small>" · " {call.status.words()}</small>
        </div>
    }
    .into_any()
}

/// `size_guide` in the chat: the table is the answer (the tool is `followUp: false`).
fn size_guide_card(call: &ToolCallView) -> impl IntoView + use<> {
    view! {
        <div class="tool-card size-guide" data-testid="size-guide">
            <strong>"Size guide"</strong>
            <small>" · " {call.status.words()}</small>
            <table>
                <tr><th>"Size"</th><th>"Chest width"</th></tr>
                {SIZE_GUIDE.iter().map(|(size, chest)| view! { <tr><td>{*size}</td><td>{*chest}</td></tr> }).collect_view()}
            </table>
        </div>
    }
}

#[component]
fn Layout() -> impl IntoView {
    let shop = expect_context::<Shop>();
    let mut pages = vec!["home".to_string(), "cart".to_string()];
    pages.extend(PRODUCTS.iter().map(|p| format!("product/{}", p.id)));
    use_agent_tool(
        ToolDef::new("navigate", "Go to a page of the shop: home, cart, or a product page.").global(true).parameters(
            json!({
                "type": "object",
                "properties": {"to": {"type": "string", "enum": pages}},
                "required": ["to"],
                "additionalProperties": false
            }),
        ),
        move |args| async move {
            let to = args["to"].as_str().unwrap_or("home").to_string();
            shop.navigate(&if to == "home" { "/".to_string() } else { format!("/{to}") });
            Ok(json!(page_opened(&shop, &to)))
        },
    );
    use_agent_tool(
        ToolDef::new("open_cart", "Open the cart page, where the cart can be seen, changed and checked out.")
            .global(true),
        move |_| async move {
            shop.navigate("/cart");
            Ok(json!(page_opened(&shop, "cart")))
        },
    );
    // The browser's own agents (WebMCP) get the same tools, when the browser has a model context.
    use_webmcp();
    // What the agent reads without calling a tool: where the user is and what is in the cart.
    use_agent_context("The page the user is on", move || shop.page_context());
    use_agent_context("The shopping cart", move || shop.cart_context());
    // How the agent's calls look in the chat.
    use_tool_call_renderer("product_view", |call| product_card(&call));
    for tool in ["cart_add", "cart_remove", "cart_view", "cart_clear"] {
        use_tool_call_renderer(tool, |call| cart_summary(&call));
    }
    use_tool_call_renderer("size_guide", |call| size_guide_card(&call));
    let errors = use_agent().state.errors;
    view! {
        <header>
            <a href="/" on:click=shop.link("/")>"Tether Shop"</a>
            <span class="spacer"></span>
            <MiniCart/>
            <span hidden data-testid="cart-add-runs">{move || shop.cart_add_runs.get()}</span>
        </header>
        <div class="layout">
            <main>
                {move || match shop.route.get() {
                    Route::Home => view! { <ProductGrid/> }.into_any(),
                    Route::Product(id) => view! { <ProductPage id=id/> }.into_any(),
                    Route::Cart => view! { <CartPage/> }.into_any(),
                    Route::Done => view! { <DonePage/> }.into_any(),
                    Route::Stress => view! { <StressPage/> }.into_any(),
                    Route::NotFound => view! { <p>"There is no such page. " <a href="/" on:click=shop.link("/")>"Back to the shop"</a></p> }.into_any(),
                }}
            </main>
            <aside class="assistant">
                <ChatPanel/>
                <section class="errors" aria-label="Runtime errors">
                    <h2>"Errors"</h2>
                    <ul data-testid="runtime-errors">
                        <For each=move || errors.get() key=|e| e.clone() children=move |e| view! { <li data-testid="runtime-error">{e}</li> }/>
                    </ul>
                </section>
                <ToolInspector/>
                <section class="mcp" aria-label="MCP clients">
                    <McpPairing/>
                </section>
            </aside>
        </div>
        <ApprovalDialog/>
    }
}

#[component]
fn ProductGrid() -> impl IntoView {
    let shop = expect_context::<Shop>();
    use_agent_tool(
        ToolDef::new("product_view", "Open a product's page; the result has its price and description.").parameters(
            json!({
                "type": "object",
                "properties": {"productId": {"type": "string", "enum": ids_enum()}},
                "required": ["productId"],
                "additionalProperties": false
            }),
        ),
        move |args| async move {
            let id = args["productId"].as_str().unwrap_or_default().to_string();
            let Some(found) = product(&id) else { return Err(format!("no product {id:?}")) };
            shop.navigate(&format!("/product/{id}"));
            Ok(json!(format!("opened the page of {}: {}. {}", found.name, price(found.price), found.description)))
        },
    );
    use_cart_add(&ids_enum());
    use_agent_context("The products in the shop", || {
        json!(PRODUCTS.iter().map(product_line).collect::<Vec<_>>().join("\n"))
    });
    view! {
        <h1>"Products"</h1>
        <div class="grid">
            {PRODUCTS
                .iter()
                .map(|p| {
                    let id = p.id;
                    let href = format!("/product/{id}");
                    view! {
                        <div class="card" data-testid="product-card" data-product=id>
                            <h3><a href=href.clone() on:click=shop.link(&href)>{p.name}</a></h3>
                            <p class="price">{price(p.price)}</p>
                            <button on:click=move |_| shop.add(id, 1)>"Add to cart"</button>
                        </div>
                    }
                })
                .collect_view()}
        </div>
    }
}

#[component]
fn ProductPage(id: String) -> impl IntoView {
    let shop = expect_context::<Shop>();
    let Some(found) = product(&id) else {
        return view! { <p>"No such product."</p> }.into_any();
    };
    let product_id = found.id;
    use_agent_tool(
        ToolDef::new("product_view", "Show this product's details: name, price, description.").parameters(json!({
            "type": "object",
            "properties": {"productId": {"type": "string", "enum": [product_id]}},
            "required": ["productId"],
            "additionalProperties": false
        })),
        move |_| async move {
            Ok(json!(format!("{} ({}): {}. {}", found.name, found.id, price(found.price), found.description)))
        },
    );
    use_cart_add(&json!([product_id]));
    if !found.sizes.is_empty() {
        // The table in the chat is the answer: no model turn after it.
        use_agent_tool(
            ToolDef::new(
                "size_guide",
                "Show the size guide of this product in the chat: the chest width of each size.",
            )
            .follow_up(false),
            |_| async {
                let sizes: Vec<String> = SIZE_GUIDE.iter().map(|(size, chest)| format!("{size}: {chest}")).collect();
                Ok(json!(format!("chest width by size: {}", sizes.join(", "))))
            },
        );
    }
    use_agent_context("The product on this page", move || json!(product_line(&found)));
    view! {
        <article class="card" data-testid="product-page" data-product=product_id>
            <h1>{found.name}</h1>
            <p>{found.description}</p>
            <p class="price">{price(found.price)}</p>
            <button on:click=move |_| shop.add(product_id, 1)>"Add to cart"</button>
        </article>
    }
    .into_any()
}

#[component]
fn CartPage() -> impl IntoView {
    let shop = expect_context::<Shop>();
    use_agent_tool(ToolDef::new("cart_view", "Show the items in the cart and the total."), move |_| async move {
        shop.backend("cart_view").await;
        Ok(shop.cart_text())
    });
    view! {
        <section data-testid="cart-page">
            <h1>"Your cart"</h1>
            <Show when=move || shop.cart.with(|c| !c.is_empty()) fallback=|| view! { <p>"The cart is empty."</p> }>
                <ul class="cart-lines">
                    <For
                        each=move || shop.cart.get()
                        key=|line| (line.product_id, line.quantity)
                        children=move |line| {
                            let name = product(line.product_id).map(|p| p.name).unwrap_or("?");
                            let id = line.product_id;
                            view! {
                                <li data-testid="cart-item" data-product=id>
                                    <span>{name} " × " {line.quantity}</span>
                                    <button on:click=move |_| shop.remove(id)>"Remove"</button>
                                </li>
                            }
                        }
                    />
                </ul>
                <p class="price">"Total: " {move || price(shop.total())}</p>
            </Show>
        </section>
    }
}

/// The cart in the header, on every page: the badge, and the tools that change the cart as a
/// whole (they are there wherever the user is, as the cart is).
#[component]
fn MiniCart() -> impl IntoView {
    let shop = expect_context::<Shop>();
    use_agent_tool(ToolDef::new("cart_clear", "Empty the cart.").risk(Risk::High), move |_| async move {
        shop.clear();
        Ok(json!("emptied the cart; cart: empty"))
    });
    use_agent_tool(
        ToolDef::new("checkout", "Place the order and pay for everything in the cart.").risk(Risk::Critical),
        move |_| async move { shop.checkout() },
    );
    view! {
        // `cart_remove` is there while something is in the cart (an empty enum names nothing).
        <Show when=move || shop.cart.with(|c| !c.is_empty())>
            <CartRemoveTool/>
        </Show>
        <a class="cart-link" href="/cart" on:click=shop.link("/cart")>
            "Cart "
            <span class="badge" data-testid="cart-badge" data-cart=move || shop.cart_attribute()>{move || shop.item_count()}</span>
        </a>
        {move || {
            shop.backend
                .get()
                .map(|backend| match backend {
                    Backend::Waiting(tool) => {
                        view! {
                            <p class="backend" data-testid="backend" data-state="waiting">
                                {tool} " is waiting for the shop's backend…"
                            </p>
                        }
                    }
                    Backend::Stopped(tool) => {
                        view! {
                            <p class="backend" data-testid="backend" data-state="stopped">
                                {tool} " was stopped before it finished"
                            </p>
                        }
                    }
                })
        }}
    }
}

/// `cart_remove`, whose `productId` enum lists what is in the cart now (re-registered when the
/// cart changes).
#[component]
fn CartRemoveTool() -> impl IntoView {
    let shop = expect_context::<Shop>();
    use_agent_tool_reactive(
        move || {
            let ids: Vec<&str> = shop.cart.with(|lines| lines.iter().map(|l| l.product_id).collect());
            ToolDef::new("cart_remove", "Remove a product from the cart.").risk(Risk::High).parameters(json!({
                "type": "object",
                "properties": {"productId": {"type": "string", "enum": ids}},
                "required": ["productId"],
                "additionalProperties": false
            }))
        },
        move |args| async move {
            let id = args["productId"].as_str().unwrap_or_default().to_string();
            shop.remove(&id);
            let name = product(&id).map_or(id.as_str(), |p| p.name).to_string();
            Ok(json!(format!("removed {name}; cart: {}", shop.cart_summary())))
        },
    );
}

#[component]
fn DonePage() -> impl IntoView {
    let shop = expect_context::<Shop>();
    view! {
        <section>
            <h1>"Thank you!"</h1>
            <p>"Your order number is " <strong data-testid="order-number">{move || shop.last_order.get().unwrap_or_default()}</strong></p>
            <a href="/" on:click=shop.link("/")>"Back to the shop"</a>
        </section>
    }
}

/// Registers 27 tools: with the layout's four (navigation and the mini cart's; the cart is empty
/// on a fresh page) the page has 31, and the 31st is refused
/// (the cap is 30), loudly.
#[component]
fn StressPage() -> impl IntoView {
    for n in 1..=27 {
        use_agent_tool(
            ToolDef::new(format!("stress_tool_{n}"), format!("Stress tool number {n}.")),
            move |_| async move { Ok(json!({"n": n})) },
        );
    }
    view! { <h1>"A page with 31 tools (27 here, 4 in the layout)"</h1> <p>"The inspector shows which one was refused."</p> }
}
