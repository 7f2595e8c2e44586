package org.opsbench.stockkeeper;

/**
 * When and how much to reorder. The reorder point is the demand during the supplier's lead time plus safety
 * stock; an order brings the stock up to the reorder point plus {@code coverDays} of demand, rounded up to whole
 * cases of {@code caseSize} units.
 */
public record ReorderPolicy(double dailyDemand, int leadTimeDays, int safetyStock, int coverDays, int caseSize) {
    public ReorderPolicy {
        if (dailyDemand < 0 || leadTimeDays < 0 || safetyStock < 0 || coverDays < 0 || caseSize < 1) {
            throw new IllegalArgumentException("invalid reorder policy");
        }
    }

    public int reorderPoint() {
        return (int) Math.ceil(dailyDemand * leadTimeDays) + safetyStock;
    }

    public boolean shouldReorder(int available) {
        return available <= reorderPoint();
    }

    /** Units to order now (a multiple of the case size), 0 when the stock is above the reorder point. */
    public int orderQuantity(int available) {
        if (!shouldReorder(available)) {
            return 0;
        }
        int target = reorderPoint() + (int) Math.ceil(dailyDemand * coverDays);
        int missing = Math.max(0, target - available);
        int cases = (missing + caseSize - 1) / caseSize;
        return cases * caseSize;
    }
}
