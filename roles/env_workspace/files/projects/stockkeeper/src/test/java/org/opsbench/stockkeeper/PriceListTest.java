package org.opsbench.stockkeeper;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.math.BigDecimal;
import org.junit.Test;

public class PriceListTest {
    private final PriceList prices = PriceList.standard();
    private final Sku eyepiece = new Sku("EYE-0032", 4550);

    @Test
    public void noDiscountBelowTheFirstTier() {
        assertEquals(BigDecimal.ZERO, prices.discountFor(9));
        assertEquals(9 * 4550, prices.lineTotalCents(eyepiece, 9));
    }

    @Test
    public void tierStartsAtItsMinimumQuantity() {
        assertEquals(new BigDecimal("0.05"), prices.discountFor(10));
        assertEquals(new BigDecimal("0.10"), prices.discountFor(50));
        assertEquals(new BigDecimal("0.15"), prices.discountFor(1000));
    }

    @Test
    public void lineTotalAppliesTheDiscount() {
        // 10 x 45.50 = 455.00, 5 % off = 432.25
        assertEquals(43225, prices.lineTotalCents(eyepiece, 10));
    }

    @Test
    public void halfCentsRoundToEven() {
        Sku cheap = new Sku("CAP-0001", 5);
        // 10 x 0.05 = 50 cents, 5 % off = 47.5 -> 48 (half-even)
        assertEquals(48, prices.lineTotalCents(cheap, 10));
        // 50 x 0.05 = 250 cents, 10 % off = 225
        assertEquals(225, prices.lineTotalCents(cheap, 50));
    }

    @Test
    public void skuCodesAreValidated() {
        assertThrows(IllegalArgumentException.class, () -> new Sku("eyepiece", 100));
        assertThrows(IllegalArgumentException.class, () -> new Sku("EYE-0032", -1));
    }

    @Test
    public void quantityMustBePositive() {
        assertThrows(IllegalArgumentException.class, () -> prices.lineTotalCents(eyepiece, 0));
    }
}
