// home.js: the home page is rendered by the server; this records which product the user opens
// (an interaction span, kept across the navigation by app.js).
(() => {
  "use strict";
  for (const link of document.querySelectorAll('[data-testid="product-link"]')) {
    link.addEventListener("click", () => {
      const span = startSpan("click product-link", "interaction", null);
      span.attributes["product.id"] = link.closest('[data-testid="product-card"]').dataset.productId;
      endSpan(span, "");
    });
  }
})();
