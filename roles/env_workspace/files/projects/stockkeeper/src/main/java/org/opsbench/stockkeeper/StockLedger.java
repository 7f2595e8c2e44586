package org.opsbench.stockkeeper;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * On-hand and reserved units per SKU. Available = on hand - reserved. Reserving holds units; committing a
 * reservation takes them off the shelf; releasing it makes them available again. Not thread-safe.
 */
public class StockLedger {
    private final Map<String, Integer> onHand = new TreeMap<>();
    private final Map<String, Integer> reserved = new HashMap<>();
    private final Map<Long, Reservation> open = new HashMap<>();
    private long nextId = 1;

    /** Goods received: adds {@code quantity} units of {@code code} to the shelf. */
    public void receive(String code, int quantity) {
        if (quantity <= 0) {
            throw new IllegalArgumentException("received quantity must be positive: " + quantity);
        }
        onHand.merge(code, quantity, Integer::sum);
    }

    public int onHand(String code) {
        return onHand.getOrDefault(code, 0);
    }

    public int reserved(String code) {
        return reserved.getOrDefault(code, 0);
    }

    public int available(String code) {
        return onHand(code) - reserved(code);
    }

    /** Holds {@code quantity} units for an order, or fails without changing anything. */
    public Reservation reserve(String code, int quantity) throws InsufficientStockException {
        if (quantity <= 0) {
            throw new IllegalArgumentException("reserved quantity must be positive: " + quantity);
        }
        int available = available(code);
        if (quantity > available) {
            throw new InsufficientStockException(code, quantity, available);
        }
        Reservation r = new Reservation(nextId++, code, quantity);
        reserved.merge(code, quantity, Integer::sum);
        open.put(r.id(), r);
        return r;
    }

    /** The order shipped: the reserved units leave the shelf. */
    public void commit(long reservationId) {
        Reservation r = take(reservationId);
        reserved.merge(r.code(), -r.quantity(), Integer::sum);
        onHand.merge(r.code(), -r.quantity(), Integer::sum);
    }

    /** The order was cancelled: the reserved units become available again. */
    public void release(long reservationId) {
        Reservation r = take(reservationId);
        reserved.merge(r.code(), -r.quantity(), Integer::sum);
    }

    public int openReservations() {
        return open.size();
    }

    /** On-hand units per SKU, sorted by code. */
    public Map<String, Integer> snapshot() {
        return new TreeMap<>(onHand);
    }

    private Reservation take(long reservationId) {
        Reservation r = open.remove(reservationId);
        if (r == null) {
            throw new IllegalStateException("no open reservation " + reservationId);
        }
        return r;
    }
}
