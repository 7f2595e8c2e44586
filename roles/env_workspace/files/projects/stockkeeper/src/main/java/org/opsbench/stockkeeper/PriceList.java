package org.opsbench.stockkeeper;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.util.Map;
import java.util.NavigableMap;
import java.util.TreeMap;

/**
 * Volume pricing: a line of {@code quantity} units gets the discount of the largest tier whose minimum quantity
 * it reaches. Totals are in cents, rounded half-even (banker's rounding) once per line.
 */
public class PriceList {
    private final NavigableMap<Integer, BigDecimal> tiers = new TreeMap<>();

    /** Default tiers: 10+ units 5 % off, 50+ units 10 % off, 200+ units 15 % off. */
    public static PriceList standard() {
        return new PriceList(Map.of(10, new BigDecimal("0.05"), 50, new BigDecimal("0.10"),
                                    200, new BigDecimal("0.15")));
    }

    public PriceList(Map<Integer, BigDecimal> discountByMinimumQuantity) {
        for (Map.Entry<Integer, BigDecimal> e : discountByMinimumQuantity.entrySet()) {
            BigDecimal d = e.getValue();
            if (e.getKey() < 1 || d.signum() < 0 || d.compareTo(BigDecimal.ONE) >= 0) {
                throw new IllegalArgumentException("bad tier " + e.getKey() + " -> " + d);
            }
            tiers.put(e.getKey(), d);
        }
    }

    /** The discount rate for a line of {@code quantity} units (0 below the first tier). */
    public BigDecimal discountFor(int quantity) {
        Map.Entry<Integer, BigDecimal> tier = tiers.floorEntry(quantity);
        return tier == null ? BigDecimal.ZERO : tier.getValue();
    }

    /** The line total in cents after the volume discount. */
    public long lineTotalCents(Sku sku, int quantity) {
        if (quantity <= 0) {
            throw new IllegalArgumentException("quantity must be positive: " + quantity);
        }
        BigDecimal gross = BigDecimal.valueOf(sku.unitPriceCents()).multiply(BigDecimal.valueOf(quantity));
        BigDecimal net = gross.multiply(BigDecimal.ONE.subtract(discountFor(quantity)));
        return net.setScale(0, RoundingMode.HALF_EVEN).longValueExact();
    }
}
