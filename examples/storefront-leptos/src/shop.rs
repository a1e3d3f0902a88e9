//! The shop's state: products, the cart, the route, and the orders placed.

use leptos::ev::MouseEvent;
use leptos::prelude::*;
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

/// A product of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Product {
    pub(crate) id: &'static str,
    pub(crate) name: &'static str,
    /// In cents.
    pub(crate) price: u32,
    pub(crate) description: &'static str,
    /// The sizes it comes in (none: one size).
    pub(crate) sizes: &'static [&'static str],
}

/// The T-shirt's sizes and their chest widths (the size guide).
pub(crate) const SIZE_GUIDE: [(&str, &str); 3] = [("S", "48 cm"), ("M", "52 cm"), ("L", "56 cm")];

/// The catalogue (`docs/storefront.md`).
pub(crate) const PRODUCTS: [Product; 4] = [
    Product { id: "mug-red", name: "Red mug", price: 1200, description: "A red ceramic mug, 350 ml.", sizes: &[] },
    Product { id: "mug-blue", name: "Blue mug", price: 1200, description: "A blue ceramic mug, 350 ml.", sizes: &[] },
    Product {
        id: "tee-black",
        name: "Black T-shirt",
        price: 2000,
        description: "A black cotton T-shirt.",
        sizes: &["S", "M", "L"],
    },
    Product {
        id: "poster-space",
        name: "Space poster",
        price: 1500,
        description: "A poster of the Milky Way, 50 × 70 cm.",
        sizes: &[],
    },
];

pub(crate) fn product(id: &str) -> Option<Product> {
    PRODUCTS.iter().copied().find(|p| p.id == id)
}

pub(crate) fn price(cents: u32) -> String {
    format!("${}.{:02}", cents / 100, cents % 100)
}

/// A product as the agent reads it: `Red mug (mug-red): $12.00. A red ceramic mug, 350 ml.`
pub(crate) fn product_line(p: &Product) -> String {
    format!("{} ({}): {}. {}", p.name, p.id, price(p.price), p.description)
}

/// The size that `answer` (a size, or words such as "large please") names among `sizes`.
pub(crate) fn size_named(answer: &str, sizes: &[&'static str]) -> Option<&'static str> {
    let answer = answer.trim().to_uppercase();
    if let Some(size) = sizes.iter().find(|s| **s == answer) {
        return Some(size);
    }
    answer.split(|c: char| !c.is_alphanumeric()).find_map(|word| {
        let word = match word {
            "SMALL" => "S",
            "MEDIUM" => "M",
            "LARGE" => "L",
            other => other,
        };
        sizes.iter().find(|s| **s == word).copied()
    })
}

/// One line of the cart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CartLine {
    pub(crate) product_id: &'static str,
    /// The size, for a product that comes in sizes (none when added from the page's button).
    pub(crate) size: Option<&'static str>,
    pub(crate) quantity: u32,
}

/// A page of the shop.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Route {
    Home,
    Product(String),
    Cart,
    Done,
    Stress,
    NotFound,
}

impl Route {
    fn parse(path: &str) -> Route {
        match path.trim_end_matches('/') {
            "" => Route::Home,
            "/cart" => Route::Cart,
            "/checkout/done" => Route::Done,
            "/stress" => Route::Stress,
            other => match other.strip_prefix("/product/") {
                Some(id) => Route::Product(id.to_string()),
                None => Route::NotFound,
            },
        }
    }
}

fn current_path() -> String {
    web_sys::window().and_then(|w| w.location().pathname().ok()).unwrap_or_else(|| "/".into())
}

/// The simulated backend latency of `?latency=MS` in the page's address (0 without it).
fn latency_from_address() -> u32 {
    let search = web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default();
    search
        .trim_start_matches('?')
        .split('&')
        .find_map(|pair| pair.strip_prefix("latency="))
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0)
}

/// Waits `ms` milliseconds (a browser timer).
async fn sleep_ms(ms: u32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms as i32);
        }
    });
    let _ = wasm_bindgen_futures::JsFuture::from(promise).await;
}

/// What a handler that waits for the (simulated) backend is doing, for the page to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// `tool` waits for the backend.
    Waiting(&'static str),
    /// `tool` was stopped (its call cancelled: Stop, the timeout, the server) before it finished.
    Stopped(&'static str),
}

/// Marks the wait of one handler: dropped before [`BackendWait::finish`], the handler's future
/// was dropped unfinished, which is how a Rust handler learns that its call was cancelled.
struct BackendWait {
    shop: Shop,
    tool: &'static str,
    finished: bool,
}

impl BackendWait {
    fn finish(mut self) {
        self.finished = true;
        self.shop.backend.set(None);
    }
}

impl Drop for BackendWait {
    fn drop(&mut self) {
        if !self.finished {
            self.shop.backend.set(Some(Backend::Stopped(self.tool)));
        }
    }
}

/// The shop's reactive state; `Copy` handles, provided as context.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shop {
    pub(crate) route: RwSignal<Route>,
    pub(crate) cart: RwSignal<Vec<CartLine>>,
    pub(crate) last_order: RwSignal<Option<String>>,
    /// How many times a `cart_add` handler ran in this page (a second run of one call would show).
    pub(crate) cart_add_runs: RwSignal<u32>,
    orders: RwSignal<u32>,
    /// The simulated backend's latency (`?latency=MS`), which `cart_view` waits for.
    latency_ms: u32,
    /// What the handler waiting for the backend does now.
    pub(crate) backend: RwSignal<Option<Backend>>,
}

impl Shop {
    /// The state, with the route read from the address bar and kept in step with Back/Forward.
    pub(crate) fn new() -> Shop {
        let shop = Shop {
            route: RwSignal::new(Route::parse(&current_path())),
            cart: RwSignal::new(Vec::new()),
            last_order: RwSignal::new(None),
            cart_add_runs: RwSignal::new(0),
            orders: RwSignal::new(1000),
            latency_ms: latency_from_address(),
            backend: RwSignal::new(None),
        };
        let on_popstate = Closure::<dyn Fn()>::new(move || shop.route.set(Route::parse(&current_path())));
        if let Some(window) = web_sys::window() {
            let _ = window.add_event_listener_with_callback("popstate", on_popstate.as_ref().unchecked_ref());
        }
        // The listener lives as long as the page.
        on_popstate.forget();
        shop
    }

    /// Goes to `path` without reloading the page.
    pub(crate) fn navigate(&self, path: &str) {
        if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
            let _ = history.push_state_with_url(&JsValue::NULL, "", Some(path));
        }
        self.route.set(Route::parse(path));
    }

    /// An `on:click` handler for a link to `path`.
    pub(crate) fn link(&self, path: &str) -> impl Fn(MouseEvent) + 'static + use<> {
        let (shop, path) = (*self, path.to_string());
        move |event: MouseEvent| {
            event.prevent_default();
            shop.navigate(&path);
        }
    }

    /// Waits for the simulated backend on behalf of `tool` (nothing to wait for without
    /// `?latency=`). The page shows the wait, and shows that the tool was stopped if the
    /// handler's future is dropped meanwhile (its call cancelled).
    pub(crate) async fn backend(&self, tool: &'static str) {
        if self.latency_ms == 0 {
            return;
        }
        self.backend.set(Some(Backend::Waiting(tool)));
        let wait = BackendWait { shop: *self, tool, finished: false };
        sleep_ms(self.latency_ms).await;
        wait.finish();
    }

    pub(crate) fn item_count(&self) -> u32 {
        self.cart.with(|lines| lines.iter().map(|l| l.quantity).sum())
    }

    pub(crate) fn total(&self) -> u32 {
        self.cart.with(|lines| lines.iter().map(|l| product(l.product_id).map_or(0, |p| p.price) * l.quantity).sum())
    }

    pub(crate) fn add(&self, id: &str, quantity: u32) {
        self.add_sized(id, None, quantity);
    }

    fn add_sized(&self, id: &str, size: Option<&'static str>, quantity: u32) {
        let Some(found) = product(id) else { return };
        self.cart.update(|lines| match lines.iter_mut().find(|l| l.product_id == found.id && l.size == size) {
            Some(line) => line.quantity += quantity,
            None => lines.push(CartLine { product_id: found.id, size, quantity }),
        });
    }

    /// What `cart_add` asks the user before adding a product that comes in sizes without one
    /// (`{"product": …, "sizes": […]}`), if anything.
    pub(crate) fn size_question(args: &Value) -> Option<Value> {
        let found = args["productId"].as_str().and_then(product)?;
        let unsized_ = !found.sizes.is_empty() && args["size"].as_str().is_none();
        unsized_.then(|| json!({"product": found.name, "sizes": found.sizes}))
    }

    /// The `cart_add` handler: the arguments are validated (and `quantity` defaulted) already;
    /// `answer` is the user's answer to [`Shop::size_question`]. The result says what happened
    /// in a short sentence, which small models read best.
    pub(crate) fn add_from_args(&self, args: &Value, answer: Option<&Value>) -> Result<Value, String> {
        self.cart_add_runs.update(|runs| *runs += 1);
        let id = args["productId"].as_str().unwrap_or_default();
        let quantity = args["quantity"].as_u64().unwrap_or(1) as u32;
        let Some(found) = product(id) else { return Err(format!("no product {id:?}")) };
        // A size for a product of one size is left out.
        let said = args["size"].as_str().or_else(|| answer.and_then(Value::as_str));
        let size = match (found.sizes.is_empty(), said) {
            (true, _) => None,
            (false, Some(said)) => Some(size_named(said, found.sizes).ok_or_else(|| {
                format!("{said:?} is not a size of the {}: it comes in {}", found.name, found.sizes.join(", "))
            })?),
            (false, None) => {
                return Err(format!("the {} comes in sizes {}: say which", found.name, found.sizes.join(", ")));
            }
        };
        self.add_sized(id, size, quantity);
        let what = size.map_or(found.name.to_string(), |size| format!("{} (size {size})", found.name));
        Ok(json!(format!("added {quantity} × {what}; cart: {}", self.cart_summary())))
    }

    /// The cart in words: `3 items (2 × Red mug, 1 × Black T-shirt)`, or `empty`.
    pub(crate) fn cart_summary(&self) -> String {
        let count = self.cart.with_untracked(|lines| lines.iter().map(|l| l.quantity).sum::<u32>());
        if count == 0 {
            return "empty".into();
        }
        let lines: Vec<String> = self.cart.with_untracked(|lines| {
            lines
                .iter()
                .map(|l| {
                    let name = product(l.product_id).map_or("?", |p| p.name);
                    match l.size {
                        Some(size) => format!("{} × {name} ({size})", l.quantity),
                        None => format!("{} × {name}", l.quantity),
                    }
                })
                .collect()
        });
        format!("{count} {} ({})", if count == 1 { "item" } else { "items" }, lines.join(", "))
    }

    /// What `data-cart` on the cart badge says: `mug-red=2 tee-black=1`, each product once
    /// whatever its sizes (checked by the benchmark).
    pub(crate) fn cart_attribute(&self) -> String {
        self.cart.with(|lines| {
            let mut counts: Vec<(&str, u32)> = Vec::new();
            for line in lines {
                match counts.iter_mut().find(|(id, _)| *id == line.product_id) {
                    Some((_, n)) => *n += line.quantity,
                    None => counts.push((line.product_id, line.quantity)),
                }
            }
            counts.iter().map(|(id, n)| format!("{id}={n}")).collect::<Vec<_>>().join(" ")
        })
    }

    pub(crate) fn remove(&self, id: &str) {
        self.cart.update(|lines| lines.retain(|l| l.product_id != id));
    }

    pub(crate) fn clear(&self) {
        self.cart.set(Vec::new());
    }

    /// The cart as the agent reads it (`use_agent_context`): `3 items (2 × Red mug, 1 × Black
    /// T-shirt), total $44.00`, or `empty`. Tracked: the entry is sent again when the cart changes.
    pub(crate) fn cart_context(&self) -> Value {
        self.cart.track();
        match self.cart.with_untracked(Vec::is_empty) {
            true => json!("empty"),
            false => json!(format!("{}, total {}", self.cart_summary(), price(self.total()))),
        }
    }

    /// The page the user is on, in words (`use_agent_context`). Tracked.
    pub(crate) fn page_context(&self) -> Value {
        json!(match self.route.get() {
            Route::Home => "the home page, with every product".to_string(),
            Route::Product(id) => match product(&id) {
                Some(p) => format!("the page of {}", p.name),
                None => "a page for a product that does not exist".to_string(),
            },
            Route::Cart => "the cart page".to_string(),
            Route::Done => "the order confirmation".to_string(),
            Route::Stress => "the stress page".to_string(),
            Route::NotFound => "a page that does not exist".to_string(),
        })
    }

    /// The `cart_view` result: `cart: 3 items (…); total $44.00`.
    pub(crate) fn cart_text(&self) -> Value {
        match self.cart.with_untracked(Vec::is_empty) {
            true => json!("cart: empty"),
            false => json!(format!("cart: {}; total {}", self.cart_summary(), price(self.total()))),
        }
    }

    /// The `checkout` handler: places the order and shows the confirmation.
    pub(crate) fn checkout(&self) -> Result<Value, String> {
        if self.cart.with_untracked(Vec::is_empty) {
            return Err("the cart is empty: nothing to order".into());
        }
        let (what, total) = (self.cart_summary(), price(self.total()));
        self.orders.update(|n| *n += 1);
        let order = format!("T-{}", self.orders.get_untracked());
        self.clear();
        self.last_order.set(Some(order.clone()));
        self.navigate("/checkout/done");
        Ok(json!(format!("placed order {order}: {what}, total {total}; the cart is now empty")))
    }
}
