package org.opsbench.stockkeeper;

import java.util.Objects;
import java.util.regex.Pattern;

/** A stock keeping unit: an article code such as {@code TEL-0070} and its unit price in cents. */
public record Sku(String code, long unitPriceCents) {
    private static final Pattern CODE = Pattern.compile("[A-Z]{3}-\\d{4}");

    public Sku {
        Objects.requireNonNull(code, "code");
        if (!CODE.matcher(code).matches()) {
            throw new IllegalArgumentException("SKU code must look like ABC-1234: " + code);
        }
        if (unitPriceCents < 0) {
            throw new IllegalArgumentException("unit price must not be negative: " + unitPriceCents);
        }
    }
}
