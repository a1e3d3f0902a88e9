// The shop's state: products, the cart, the route, and the orders placed (docs/storefront.md).
import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState, type MouseEvent, type ReactNode } from "react";

export interface Product {
  id: string;
  name: string;
  /** In cents. */
  price: number;
  description: string;
  /** The sizes it comes in (none: one size). */
  sizes: string[];
}

export const PRODUCTS: Product[] = [
  { id: "mug-red", name: "Red mug", price: 1200, description: "A red ceramic mug, 350 ml.", sizes: [] },
  { id: "mug-blue", name: "Blue mug", price: 1200, description: "A blue ceramic mug, 350 ml.", sizes: [] },
  { id: "tee-black", name: "Black T-shirt", price: 2000, description: "A black cotton T-shirt.", sizes: ["S", "M", "L"] },
  { id: "poster-space", name: "Space poster", price: 1500, description: "A poster of the Milky Way, 50 × 70 cm.", sizes: [] },
];

/** The T-shirt's sizes and their chest widths (the size guide). */
export const SIZE_GUIDE: [string, string][] = [
  ["S", "48 cm"],
  ["M", "52 cm"],
  ["L", "56 cm"],
];

/** The size that `answer` (a size, or words such as "large please") names among `sizes`. */
export function sizeNamed(answer: string, sizes: string[]): string | undefined {
  const upper = answer.trim().toUpperCase();
  if (sizes.includes(upper)) return upper;
  const words: Record<string, string> = { SMALL: "S", MEDIUM: "M", LARGE: "L" };
  return upper
    .split(/[^A-Z0-9]+/)
    .map((word) => words[word] ?? word)
    .find((word) => sizes.includes(word));
}

export const PRODUCT_IDS = PRODUCTS.map((p) => p.id) as [string, ...string[]];

export const product = (id: string) => PRODUCTS.find((p) => p.id === id);

export const price = (cents: number) => `$${Math.floor(cents / 100)}.${String(cents % 100).padStart(2, "0")}`;

export interface CartLine {
  productId: string;
  /** The size, for a product that comes in sizes (none when added from the page's button). */
  size?: string;
  quantity: number;
}

export type Route =
  | { page: "home" }
  | { page: "product"; id: string }
  | { page: "cart" }
  | { page: "done" }
  | { page: "stress" }
  | { page: "notFound" };

export function parseRoute(path: string): Route {
  const trimmed = path.replace(/\/+$/, "");
  if (trimmed === "") return { page: "home" };
  if (trimmed === "/cart") return { page: "cart" };
  if (trimmed === "/checkout/done") return { page: "done" };
  if (trimmed === "/stress") return { page: "stress" };
  if (trimmed.startsWith("/product/")) return { page: "product", id: trimmed.slice("/product/".length) };
  return { page: "notFound" };
}

export const itemCount = (cart: CartLine[]) => cart.reduce((n, l) => n + l.quantity, 0);
export const total = (cart: CartLine[]) => cart.reduce((sum, l) => sum + (product(l.productId)?.price ?? 0) * l.quantity, 0);

export function addToCart(cart: CartLine[], id: string, quantity: number, size?: string): CartLine[] {
  const same = (l: CartLine) => l.productId === id && l.size === size;
  return cart.some(same)
    ? cart.map((l) => (same(l) ? { ...l, quantity: l.quantity + quantity } : l))
    : [...cart, size === undefined ? { productId: id, quantity } : { productId: id, size, quantity }];
}

/**
 * The cart in words, as the tools' results say it (short sentences small models read best):
 * `3 items (2 × Red mug, 1 × Black T-shirt)`, or `empty`.
 */
export function cartSummary(cart: CartLine[]): string {
  const count = itemCount(cart);
  if (count === 0) return "empty";
  const lines = cart.map((l) => `${l.quantity} × ${product(l.productId)?.name ?? "?"}${l.size ? ` (${l.size})` : ""}`);
  return `${count} ${count === 1 ? "item" : "items"} (${lines.join(", ")})`;
}

/** `cart_view`'s result: `cart: 3 items (…); total $44.00`. */
export const cartText = (cart: CartLine[]) =>
  cart.length === 0 ? "cart: empty" : `cart: ${cartSummary(cart)}; total ${price(total(cart))}`;

/** The cart as the agent reads it (`useAgentContext`): `3 items (…), total $44.00`, or `empty`. */
export const cartContext = (cart: CartLine[]) => (cart.length === 0 ? "empty" : `${cartSummary(cart)}, total ${price(total(cart))}`);

/** A product as the agent reads it: `Red mug (mug-red): $12.00. A red ceramic mug, 350 ml.` */
export const productLine = (p: Product) => `${p.name} (${p.id}): ${price(p.price)}. ${p.description}`;

/** The page the user is on, in words (`useAgentContext`). */
export function pageContext(route: Route): string {
  switch (route.page) {
    case "home":
      return "the home page, with every product";
    case "product": {
      const found = product(route.id);
      return found ? `the page of ${found.name}` : "a page for a product that does not exist";
    }
    case "cart":
      return "the cart page";
    case "done":
      return "the order confirmation";
    case "stress":
      return "the stress page";
    case "notFound":
      return "a page that does not exist";
  }
}

/** What `data-cart` on the cart badge says: `mug-red=2 tee-black=1`, each product once whatever its sizes (checked by the benchmark). */
export function cartAttribute(cart: CartLine[]): string {
  const counts = new Map<string, number>();
  for (const line of cart) counts.set(line.productId, (counts.get(line.productId) ?? 0) + line.quantity);
  return [...counts].map(([id, n]) => `${id}=${n}`).join(" ");
}

/** What `navigate` and `open_cart` return: which page is open now, in words. */
export function pageOpened(cart: CartLine[], to: string): string {
  const found = to.startsWith("product/") ? product(to.slice("product/".length)) : undefined;
  if (found) return `opened the page of ${found.name} (${price(found.price)})`;
  if (to === "cart") return `opened the cart page; cart: ${cartSummary(cart)}`;
  return `opened the ${to} page`;
}

/** What a handler that waits for the (simulated) backend is doing, for the page to show. */
export type Backend = { tool: string; state: "waiting" | "stopped" } | null;

/** The simulated backend latency of `?latency=MS` in the page's address (0 without it). */
const latencyMs = Number(new URLSearchParams(location.search).get("latency") ?? 0) || 0;

export interface Shop {
  route: Route;
  cart: CartLine[];
  lastOrder: string | null;
  /** How many times a `cart_add` handler ran in this page (a second run of one call would show). */
  cartAddRuns: number;
  countCartAdd(): void;
  navigate(path: string): void;
  link(path: string): (event: MouseEvent) => void;
  setCart(cart: CartLine[]): void;
  /** The cart now (after an `await` in a handler, `cart` is the one of the render it started in). */
  currentCart(): CartLine[];
  placeOrder(): string;
  backend: Backend;
  /**
   * Waits for the simulated backend on behalf of `tool` (nothing to wait for without
   * `?latency=`). The page shows the wait; when `signal` aborts (the call was cancelled: Stop,
   * the timeout, the server), the wait ends at once, the page shows that the tool was stopped,
   * and the promise rejects.
   */
  waitForBackend(tool: string, signal: AbortSignal): Promise<void>;
}

const ShopContext = createContext<Shop | null>(null);

export function useShop(): Shop {
  const shop = useContext(ShopContext);
  if (!shop) throw new Error("useShop must be called inside <ShopProvider>");
  return shop;
}

export function ShopProvider({ children }: { children: ReactNode }) {
  const [route, setRoute] = useState<Route>(() => parseRoute(location.pathname));
  const [cart, setCartState] = useState<CartLine[]>([]);
  const cartNow = useRef(cart);
  const setCart = useCallback((next: CartLine[]) => {
    cartNow.current = next;
    setCartState(next);
  }, []);
  const [orders, setOrders] = useState(1000);
  const [lastOrder, setLastOrder] = useState<string | null>(null);
  const [cartAddRuns, setCartAddRuns] = useState(0);
  const [backend, setBackend] = useState<Backend>(null);
  const waitForBackend = useCallback((tool: string, signal: AbortSignal) => {
    if (latencyMs === 0) return Promise.resolve();
    setBackend({ tool, state: "waiting" });
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        setBackend(null);
        resolve();
      }, latencyMs);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        setBackend({ tool, state: "stopped" });
        reject(new Error(`${tool} was stopped`));
      });
    });
  }, []);

  useEffect(() => {
    const onPopState = () => setRoute(parseRoute(location.pathname));
    addEventListener("popstate", onPopState);
    return () => removeEventListener("popstate", onPopState);
  }, []);

  const navigate = useCallback((path: string) => {
    history.pushState(null, "", path);
    setRoute(parseRoute(path));
  }, []);

  const link = useCallback(
    (path: string) => (event: MouseEvent) => {
      event.preventDefault();
      navigate(path);
    },
    [navigate],
  );

  const shop = useMemo<Shop>(
    () => ({
      route,
      cart,
      lastOrder,
      cartAddRuns,
      countCartAdd: () => setCartAddRuns((runs) => runs + 1),
      navigate,
      link,
      setCart,
      currentCart: () => cartNow.current,
      placeOrder() {
        const order = `T-${orders + 1}`;
        setOrders(orders + 1);
        setLastOrder(order);
        setCart([]);
        navigate("/checkout/done");
        return order;
      },
      backend,
      waitForBackend,
    }),
    [route, cart, lastOrder, cartAddRuns, orders, navigate, link, setCart, backend, waitForBackend],
  );
  return <ShopContext.Provider value={shop}>{children}</ShopContext.Provider>;
}
