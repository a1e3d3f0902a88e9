// The Tether demo storefront in React: every page's components declare the tools the agent may
// use there (docs/storefront.md), and a chat panel drives them.
import { z } from "zod";
import {
  ApprovalDialog,
  ChatPanel,
  RuntimeErrors,
  TOOL_CALL_STATUS_WORDS,
  TetherProvider,
  ToolInspector,
  useAgentContext,
  useAgentTool,
  useToolCallRenderer,
  type AgentToolContext,
  type ToolCallView,
} from "@tether/react";
import { McpPairing } from "@tether/react/mcp";
import { useWebMcp } from "@tether/react/webmcp";
import {
  PRODUCT_IDS,
  PRODUCTS,
  SIZE_GUIDE,
  ShopProvider,
  addToCart,
  cartAttribute,
  cartContext,
  cartSummary,
  cartText,
  itemCount,
  pageContext,
  pageOpened,
  price,
  product,
  productLine,
  sizeNamed,
  total,
  useShop,
} from "./shop.js";

/** The server's WebSocket endpoint on the same origin as the page. */
const SERVER_URL = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;

const PAGES = ["home", "cart", ...PRODUCTS.map((p) => `product/${p.id}`)] as [string, ...string[]];

// Schemas that never change are built once (zod 4; converted to JSON Schema by the package).
const navigateSchema = z.object({ to: z.enum(PAGES) });
const quantity = z.number().int().min(1).max(10).default(1);
const gridViewSchema = z.object({ productId: z.enum(PRODUCT_IDS) });
const size = z
  .enum(["S", "M", "L"])
  .optional()
  .describe("For a product that comes in sizes (the T-shirt); left out, the user is asked.");
const gridAddSchema = z.object({ productId: z.enum(PRODUCT_IDS), quantity, size });
const NO_ARGS = { type: "object" };

export function App() {
  return (
    <ShopProvider>
      <TetherProvider url={SERVER_URL}>
        <Layout />
      </TetherProvider>
    </ShopProvider>
  );
}

/** `product_view` in the chat: the product's card. */
function ProductCard(call: ToolCallView) {
  const found = product(String(call.args?.productId ?? ""));
  return (
    <div className="tool-card product-card" data-testid="product-card">
      <strong>{found?.name ?? "a product"}</strong> <span className="product-card-price">{found ? price(found.price) : ""}</span>
      <small> · {TOOL_CALL_STATUS_WORDS[call.status]}</small>
    </div>
  );
}

/** What `cart_add` asks before adding a product that comes in sizes without one. */
interface SizeQuestion {
  product: string;
  sizes: string[];
}

/** The cart tools in the chat: what they do to the cart, in a line; while `cart_add` asks which size, the sizes to choose from. */
function CartSummary(call: ToolCallView) {
  const question = call.question as SizeQuestion | undefined;
  if (question && call.respond) {
    const respond = call.respond;
    return (
      <div className="tool-card cart-summary" data-testid="size-question">
        {`Which size of ${question.product}? `}
        {question.sizes.map((choice) => (
          <button key={choice} data-testid="size-choice" data-size={choice} onClick={() => respond(choice)}>
            {choice}
          </button>
        ))}
      </div>
    );
  }
  const name = product(String(call.args?.productId ?? ""))?.name ?? "";
  const quantity = Number(call.args?.quantity ?? 1);
  const sized = call.args?.size ? ` (size ${String(call.args.size)})` : "";
  const what =
    call.tool === "cart_add"
      ? `Add ${quantity} × ${name}${sized} to the cart`
      : call.tool === "cart_remove"
        ? `Remove ${name} from the cart`
        : call.tool === "cart_clear"
          ? "Empty the cart"
          : "Look at the cart";
  return (
    <div className="tool-card cart-summary" data-testid="cart-summary">
      {what}
      <small> · {TOOL_CALL_STATUS_WORDS[call.status]}</small>
    </div>
  );
}

/** `size_guide` in the chat: the table is the answer (the tool is `followUp: false`). */
function SizeGuide(call: ToolCallView) {
  return (
    <div className="tool-card size-guide" data-testid="size-guide">
      <strong>Size guide</strong>
      <small> · {TOOL_CALL_STATUS_WORDS[call.status]}</small>
      <table>
        <tbody>
          <tr>
            <th>Size</th>
            <th>Chest width</th>
          </tr>
          {SIZE_GUIDE.map(([name, chest]) => (
            <tr key={name}>
              <td>{name}</td>
              <td>{chest}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * `cart_add`'s handler: a product that comes in sizes, added without one, makes it ask the user
 * which (the question is drawn in the chat by `CartSummary`).
 */
function useCartAdd(schema: Parameters<typeof useAgentTool>[0]["schema"]) {
  const shop = useShop();
  useAgentTool(
    { name: "cart_add", description: "Add a product to the shopping cart.", schema },
    async (args: { productId: string; quantity: number; size?: string }, context: AgentToolContext) => {
      shop.countCartAdd();
      const found = product(args.productId);
      if (!found) throw new Error(`no product "${args.productId}"`);
      let chosen: string | undefined;
      if (found.sizes.length > 0) {
        // A size for a product of one size is left out.
        const said = args.size ?? String(await context.ask({ product: found.name, sizes: found.sizes }));
        chosen = sizeNamed(said, found.sizes);
        if (!chosen) throw new Error(`"${said}" is not a size of the ${found.name}: it comes in ${found.sizes.join(", ")}`);
      }
      const cart = addToCart(shop.currentCart(), found.id, args.quantity, chosen);
      shop.setCart(cart);
      const what = chosen ? `${found.name} (size ${chosen})` : found.name;
      return `added ${args.quantity} × ${what}; cart: ${cartSummary(cart)}`;
    },
  );
}

function Layout() {
  const shop = useShop();
  // How the agent's calls look in the chat.
  useToolCallRenderer("product_view", ProductCard);
  useToolCallRenderer("cart_add", CartSummary);
  useToolCallRenderer("cart_remove", CartSummary);
  useToolCallRenderer("cart_view", CartSummary);
  useToolCallRenderer("cart_clear", CartSummary);
  useToolCallRenderer("size_guide", SizeGuide);
  useAgentTool(
    { name: "navigate", description: "Go to a page of the shop: home, cart, or a product page.", schema: navigateSchema, global: true },
    ({ to }) => {
      shop.navigate(to === "home" ? "/" : `/${to}`);
      return pageOpened(shop.cart, to);
    },
  );
  useAgentTool(
    { name: "open_cart", description: "Open the cart page, where the cart can be seen, changed and checked out.", schema: NO_ARGS, global: true },
    () => {
      shop.navigate("/cart");
      return pageOpened(shop.cart, "cart");
    },
  );
  // The browser's own agents (WebMCP) get the same tools, when the browser has a model context.
  useWebMcp();
  // What the agent reads without calling a tool: where the user is and what is in the cart.
  useAgentContext({ description: "The page the user is on", value: pageContext(shop.route) });
  useAgentContext({ description: "The shopping cart", value: cartContext(shop.cart) });
  const { route } = shop;
  return (
    <>
      <header>
        <a href="/" onClick={shop.link("/")}>
          Tether Shop
        </a>
        <span className="spacer" />
        <MiniCart />
        <span hidden data-testid="cart-add-runs">
          {shop.cartAddRuns}
        </span>
      </header>
      <div className="layout">
        <main>
          {route.page === "home" ? (
            <ProductGrid />
          ) : route.page === "product" ? (
            <ProductPage key={route.id} id={route.id} />
          ) : route.page === "cart" ? (
            <CartPage />
          ) : route.page === "done" ? (
            <DonePage />
          ) : route.page === "stress" ? (
            <StressPage />
          ) : (
            <p>
              There is no such page.{" "}
              <a href="/" onClick={shop.link("/")}>
                Back to the shop
              </a>
            </p>
          )}
        </main>
        <aside className="assistant">
          <ChatPanel />
          <section className="errors" aria-label="Runtime errors">
            <h2>Errors</h2>
            <RuntimeErrors />
          </section>
          <ToolInspector />
          <section className="mcp" aria-label="MCP clients">
            <McpPairing />
          </section>
        </aside>
      </div>
      <ApprovalDialog />
    </>
  );
}

function ProductGrid() {
  const shop = useShop();
  useAgentTool(
    { name: "product_view", description: "Open a product's page; the result has its price and description.", schema: gridViewSchema },
    ({ productId }) => {
      const found = product(productId);
      if (!found) throw new Error(`no product "${productId}"`);
      shop.navigate(`/product/${productId}`);
      return `opened the page of ${found.name}: ${price(found.price)}. ${found.description}`;
    },
  );
  useCartAdd(gridAddSchema);
  useAgentContext({ description: "The products in the shop", value: PRODUCTS.map(productLine).join("\n") });
  return (
    <>
      <h1>Products</h1>
      <div className="grid">
        {PRODUCTS.map((p) => (
          <div key={p.id} className="card" data-testid="product-card" data-product={p.id}>
            <h3>
              <a href={`/product/${p.id}`} onClick={shop.link(`/product/${p.id}`)}>
                {p.name}
              </a>
            </h3>
            <p className="price">{price(p.price)}</p>
            <button onClick={() => shop.setCart(addToCart(shop.cart, p.id, 1))}>Add to cart</button>
          </div>
        ))}
      </div>
    </>
  );
}

function ProductPage({ id }: { id: string }) {
  const found = product(id);
  // Plain JSON Schema works as well as zod: the enum holds only this product.
  const only = { type: "string", enum: [id] };
  useAgentTool(
    {
      name: "product_view",
      description: "Show this product's details: name, price, description.",
      schema: { type: "object", properties: { productId: only }, required: ["productId"], additionalProperties: false },
    },
    () => (found ? `${found.name} (${found.id}): ${price(found.price)}. ${found.description}` : null),
  );
  useCartAdd({
    type: "object",
    properties: {
      productId: only,
      quantity: { type: "integer", minimum: 1, maximum: 10, default: 1 },
      size: { type: "string", enum: ["S", "M", "L"], description: "For a product that comes in sizes (the T-shirt); left out, the user is asked." },
    },
    required: ["productId"],
    additionalProperties: false,
  });
  return <ProductDetails found={found} />;
}

/** The size guide of a product that comes in sizes: the table in the chat is the answer. */
function SizeGuideTool() {
  useAgentTool(
    { name: "size_guide", description: "Show the size guide of this product in the chat: the chest width of each size.", followUp: false },
    () => `chest width by size: ${SIZE_GUIDE.map(([name, chest]) => `${name}: ${chest}`).join(", ")}`,
  );
  return null;
}

function ProductDetails({ found }: { found: ReturnType<typeof product> }) {
  const shop = useShop();
  useAgentContext({ description: "The product on this page", value: found ? productLine(found) : "no such product" });
  if (!found) return <p>No such product.</p>;
  return (
    <article className="card" data-testid="product-page" data-product={found.id}>
      {found.sizes.length > 0 ? <SizeGuideTool /> : null}
      <h1>{found.name}</h1>
      <p>{found.description}</p>
      <p className="price">{price(found.price)}</p>
      <button onClick={() => shop.setCart(addToCart(shop.cart, found.id, 1))}>Add to cart</button>
    </article>
  );
}

function CartPage() {
  const shop = useShop();
  const { cart } = shop;
  useAgentTool(
    { name: "cart_view", description: "Show the items in the cart and the total.", schema: NO_ARGS },
    async (_args, { signal }) => {
      await shop.waitForBackend("cart_view", signal);
      return cartText(shop.cart);
    },
  );
  return (
    <section data-testid="cart-page">
      <h1>Your cart</h1>
      {cart.length === 0 ? (
        <p>The cart is empty.</p>
      ) : (
        <>
          <ul className="cart-lines">
            {cart.map((line) => (
              <li key={line.productId} data-testid="cart-item" data-product={line.productId}>
                <span>
                  {product(line.productId)?.name ?? "?"} × {line.quantity}
                </span>
                <button onClick={() => shop.setCart(shop.cart.filter((l) => l.productId !== line.productId))}>Remove</button>
              </li>
            ))}
          </ul>
          <p className="price">Total: {price(total(cart))}</p>
        </>
      )}
    </section>
  );
}

/**
 * The cart in the header, on every page: the badge, and the tools that change the cart as a whole
 * (they are there wherever the user is, as the cart is).
 */
function MiniCart() {
  const shop = useShop();
  useAgentTool({ name: "cart_clear", description: "Empty the cart.", risk: "high", schema: NO_ARGS }, () => {
    shop.setCart([]);
    return "emptied the cart; cart: empty";
  });
  useAgentTool(
    { name: "checkout", description: "Place the order and pay for everything in the cart.", risk: "critical", schema: NO_ARGS },
    () => {
      if (shop.cart.length === 0) throw new Error("the cart is empty: nothing to order");
      const what = `${cartSummary(shop.cart)}, total ${price(total(shop.cart))}`;
      return `placed order ${shop.placeOrder()}: ${what}; the cart is now empty`;
    },
  );
  return (
    <>
      {/* cart_remove is there while something is in the cart (an empty enum names nothing). */}
      {shop.cart.length > 0 && <CartRemoveTool />}
      <a className="cart-link" href="/cart" onClick={shop.link("/cart")}>
        Cart{" "}
        <span className="badge" data-testid="cart-badge" data-cart={cartAttribute(shop.cart)}>
          {itemCount(shop.cart)}
        </span>
      </a>
      {shop.backend && (
        <p className="backend" data-testid="backend" data-state={shop.backend.state}>
          {shop.backend.state === "waiting"
            ? `${shop.backend.tool} is waiting for the shop's backend…`
            : `${shop.backend.tool} was stopped before it finished`}
        </p>
      )}
    </>
  );
}

/** `cart_remove`, re-registered when the cart changes: the enum lists what can be removed now. */
function CartRemoveTool() {
  const shop = useShop();
  useAgentTool(
    {
      name: "cart_remove",
      description: "Remove a product from the cart.",
      risk: "high",
      schema: {
        type: "object",
        properties: { productId: { type: "string", enum: shop.cart.map((l) => l.productId) } },
        required: ["productId"],
        additionalProperties: false,
      },
    },
    ({ productId }: { productId: string }) => {
      const next = shop.cart.filter((l) => l.productId !== productId);
      shop.setCart(next);
      return `removed ${product(productId)?.name ?? productId}; cart: ${cartSummary(next)}`;
    },
  );
  return null;
}

function DonePage() {
  const shop = useShop();
  return (
    <section>
      <h1>Thank you!</h1>
      <p>
        Your order number is <strong data-testid="order-number">{shop.lastOrder ?? ""}</strong>
      </p>
      <a href="/" onClick={shop.link("/")}>
        Back to the shop
      </a>
    </section>
  );
}

const STRESS = Array.from({ length: 27 }, (_, i) => i + 1);

/**
 * 27 tools of its own next to the layout's 4 (navigation and the mini cart's; the cart is empty on a
 * fresh page): the 31st, `stress_tool_27`, is refused (cap 30), loudly.
 */
function StressPage() {
  return (
    <>
      <h1>A page with 31 tools</h1>
      <p>The layout's 4 and 27 of its own: the inspector shows which one was refused.</p>
      {STRESS.map((n) => (
        <StressTool key={n} n={n} />
      ))}
    </>
  );
}

function StressTool({ n }: { n: number }) {
  useAgentTool({ name: `stress_tool_${n}`, description: `Stress tool number ${n}.`, schema: NO_ARGS }, () => ({ n }));
  return null;
}
