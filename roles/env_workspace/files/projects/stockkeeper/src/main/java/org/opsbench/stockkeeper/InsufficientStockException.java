package org.opsbench.stockkeeper;

/** A reservation asked for more units than are available. */
public class InsufficientStockException extends Exception {
    private final String code;
    private final int requested;
    private final int available;

    public InsufficientStockException(String code, int requested, int available) {
        super(String.format("%s: %d requested, %d available", code, requested, available));
        this.code = code;
        this.requested = requested;
        this.available = available;
    }

    public String code() {
        return code;
    }

    public int requested() {
        return requested;
    }

    public int available() {
        return available;
    }
}
