package org.opsbench.stockkeeper;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;

import java.util.Map;
import org.junit.Before;
import org.junit.Test;

public class StockLedgerTest {
    private StockLedger ledger;

    @Before
    public void setUp() {
        ledger = new StockLedger();
        ledger.receive("TEL-0070", 12);
    }

    @Test
    public void reserveHoldsUnits() throws Exception {
        ledger.reserve("TEL-0070", 5);
        assertEquals(12, ledger.onHand("TEL-0070"));
        assertEquals(5, ledger.reserved("TEL-0070"));
        assertEquals(7, ledger.available("TEL-0070"));
    }

    @Test
    public void commitTakesUnitsOffTheShelf() throws Exception {
        Reservation r = ledger.reserve("TEL-0070", 5);
        ledger.commit(r.id());
        assertEquals(7, ledger.onHand("TEL-0070"));
        assertEquals(0, ledger.reserved("TEL-0070"));
        assertEquals(0, ledger.openReservations());
    }

    @Test
    public void releaseMakesUnitsAvailableAgain() throws Exception {
        Reservation r = ledger.reserve("TEL-0070", 12);
        ledger.release(r.id());
        assertEquals(12, ledger.available("TEL-0070"));
    }

    @Test
    public void overReservationFailsAndChangesNothing() throws Exception {
        ledger.reserve("TEL-0070", 10);
        InsufficientStockException e =
            assertThrows(InsufficientStockException.class, () -> ledger.reserve("TEL-0070", 3));
        assertEquals(2, e.available());
        assertEquals(10, ledger.reserved("TEL-0070"));
    }

    @Test
    public void unknownSkuHasNothingAvailable() {
        assertThrows(InsufficientStockException.class, () -> ledger.reserve("BIN-1050", 1));
    }

    @Test
    public void aReservationIsSettledOnlyOnce() throws Exception {
        Reservation r = ledger.reserve("TEL-0070", 1);
        ledger.commit(r.id());
        assertThrows(IllegalStateException.class, () -> ledger.release(r.id()));
    }

    @Test
    public void snapshotIsSortedByCode() {
        ledger.receive("BIN-1050", 4);
        assertEquals(Map.of("BIN-1050", 4, "TEL-0070", 12), ledger.snapshot());
        assertEquals("BIN-1050", ledger.snapshot().keySet().iterator().next());
    }

    @Test
    public void receivingNothingIsRejected() {
        assertThrows(IllegalArgumentException.class, () -> ledger.receive("TEL-0070", 0));
    }
}
