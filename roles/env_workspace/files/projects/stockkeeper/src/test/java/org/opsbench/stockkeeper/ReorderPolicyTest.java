package org.opsbench.stockkeeper;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class ReorderPolicyTest {
    // 2.5 units a day, 4 days lead time, 5 in reserve: reorder at 15; cover 10 more days; cases of 6.
    private final ReorderPolicy policy = new ReorderPolicy(2.5, 4, 5, 10, 6);

    @Test
    public void reorderPointIsLeadTimeDemandPlusSafetyStock() {
        assertEquals(15, policy.reorderPoint());
    }

    @Test
    public void reordersAtTheReorderPoint() {
        assertTrue(policy.shouldReorder(15));
        assertFalse(policy.shouldReorder(16));
    }

    @Test
    public void ordersWholeCasesUpToTheTarget() {
        // target 15 + 25 = 40; 40 - 15 = 25 missing -> 5 cases of 6
        assertEquals(30, policy.orderQuantity(15));
        // 40 - 0 = 40 missing -> 7 cases
        assertEquals(42, policy.orderQuantity(0));
    }

    @Test
    public void nothingToOrderAboveTheReorderPoint() {
        assertEquals(0, policy.orderQuantity(100));
    }
}
