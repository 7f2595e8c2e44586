// checkout.js: submits the checkout form to POST /api/checkout and shows the order confirmation.
(() => {
  "use strict";
  const form = byTestId("checkout-form");
  const button = byTestId("place-order");
  const field = (testid) => byTestId(testid).value.trim();

  function showOrder(order) {
    byTestId("order-id").textContent = order.order_id;
    const total = byTestId("order-total");
    total.dataset.amount = order.total.amount.toFixed(2);
    total.textContent = formatMoney(order.total.amount, order.total.currency);
    form.hidden = true; // the cart is empty now: a second submit could only fail
    byTestId("order-confirmation").hidden = false;
  }

  async function placeOrder(event) {
    event.preventDefault(); // the API places the order, not a form post
    showText("checkout-error", "");
    button.disabled = true; // one order per click
    try {
      const order = await interaction("submit place-order", (span) =>
        fetchJSON("POST /api/checkout", "/api/checkout", {
          parent: span,
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({
            user: sessionId(),
            email: field("email"),
            currency: currentCurrency(),
            address: {
              street_address: field("street"),
              city: field("city"),
              state: field("state"),
              country: field("country"),
              zip_code: field("zip"),
            },
            card: { number: field("card-number") },
          }),
        }));
      setCartCount([]);
      showOrder(order);
    } catch (err) {
      showText("checkout-error", "Could not place the order: " + err.message);
    } finally {
      button.disabled = false;
    }
  }

  form.addEventListener("submit", placeOrder);
})();
