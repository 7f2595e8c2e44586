package org.opsbench.stockkeeper;

/** Units of one SKU held for an order until they are committed (shipped) or released (order cancelled). */
public record Reservation(long id, String code, int quantity) {
    public Reservation {
        if (quantity <= 0) {
            throw new IllegalArgumentException("a reservation holds at least one unit: " + quantity);
        }
    }
}
