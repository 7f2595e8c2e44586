// product.js: the product page's "Add to cart" button (the rest of the page is rendered by the server).
(() => {
  "use strict";
  const button = byTestId("add-to-cart");
  const productId = button.dataset.productId;

  async function addToCart() {
    // the API validates the quantity (an integer from 1 to 100): its error shows in add-error
    const quantity = Number(byTestId("quantity").value);
    showText("add-status", "");
    showText("add-error", "");
    button.disabled = true; // one request at a time
    try {
      const cart = await interaction("click add-to-cart", (span) => {
        span.attributes["product.id"] = productId;
        return fetchJSON("POST /api/cart", "/api/cart", {
          parent: span,
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({
            user: sessionId(),
            product_id: productId,
            quantity: quantity,
          }),
        });
      });
      setCartCount(cart.items);
      showText("add-status", `Added ${quantity} × ${byTestId("product-name").textContent} to your cart.`);
    } catch (err) {
      showText("add-error", "Could not add to cart: " + err.message);
    } finally {
      button.disabled = false;
    }
  }

  button.addEventListener("click", addToCart);
})();
