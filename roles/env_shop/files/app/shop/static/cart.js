// cart.js: the cart page is a shell; this fills it from GET /api/cart (the items) and
// GET /api/products (names and unit prices in the page's currency), then sets data-ready="true" on
// <main>, also when it failed, so a journey knows when to look.
(() => {
  "use strict";
  const main = document.querySelector("main");
  const table = byTestId("cart-items");

  function cell(testid, text) {
    const td = document.createElement("td");
    if (testid) td.dataset.testid = testid;
    td.textContent = text;
    return td;
  }

  function row(line) {
    const tr = document.createElement("tr");
    tr.dataset.testid = "cart-item";
    tr.dataset.productId = line.id;
    const name = cell("item-name", "");
    const link = document.createElement("a");
    link.href = "/product/" + encodeURIComponent(line.id);
    link.textContent = line.name;
    name.appendChild(link);
    const amount = line.price * line.quantity; // the line's price: unit price x quantity
    const price = cell("item-price", formatMoney(amount, currentCurrency()));
    price.dataset.amount = amount.toFixed(2);
    tr.append(name, cell("item-quantity", String(line.quantity)), price);
    return tr;
  }

  function showCart(visible) {
    table.hidden = !visible;
    byTestId("cart-total").hidden = !visible;
    document.getElementById("cart-actions").hidden = !visible;
  }

  function render(items, products) {
    const byId = new Map(products.map((p) => [p.id, p]));
    const lines = items.map((item) => {
      const product = byId.get(item.product_id);
      if (!product) throw new Error("unknown product in the cart: " + item.product_id);
      return { id: item.product_id, name: product.name, quantity: item.quantity, price: product.price.amount };
    });
    const tbody = table.tBodies[0];
    tbody.textContent = "";
    let total = 0;
    for (const line of lines) {
      total += line.price * line.quantity;
      tbody.appendChild(row(line));
    }
    const totalEl = byTestId("cart-total");
    totalEl.dataset.amount = total.toFixed(2);
    totalEl.textContent = "Total: " + formatMoney(total, currentCurrency());
    showCart(lines.length > 0);
    byTestId("cart-empty").hidden = lines.length > 0;
    setCartCount(items);
  }

  function fail(what, err) {
    showCart(false);
    byTestId("cart-empty").hidden = true;
    showText("cart-error", what + ": " + err.message);
  }

  async function load() {
    try {
      const [cart, catalog] = await Promise.all([
        fetchJSON("GET /api/cart", "/api/cart"),
        fetchJSON("GET /api/products", "/api/products?currency=" + encodeURIComponent(currentCurrency())),
      ]);
      render(cart.items, catalog.products);
    } catch (err) {
      fail("Could not load the cart", err);
    } finally {
      main.dataset.ready = "true";
    }
  }

  async function emptyCart() {
    showText("cart-error", "");
    try {
      const cart = await interaction("click empty-cart", (span) =>
        fetchJSON("DELETE /api/cart", "/api/cart", { parent: span, method: "DELETE" }));
      render(cart.items, []);
    } catch (err) {
      showText("cart-error", "Could not empty the cart: " + err.message); // the cart as shown is unchanged
    }
  }

  byTestId("empty-cart").addEventListener("click", emptyCart);
  load();
})();
