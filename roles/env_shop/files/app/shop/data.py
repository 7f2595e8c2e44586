"""Static data: the seed product catalog and the currency rate table."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

PRODUCTS: list[dict[str, Any]] = [
    {"id": "OLJCESPC7Z", "name": "National Park Foundation Explorascope",
     "description": "A 60 mm refractor with an alt-azimuth mount: a first telescope for parks and backyards.",
     "price_usd": 101.96, "categories": ["telescopes"], "picture": "NationalParkFoundationExplorascope.jpg"},
    {"id": "66VCHSJNUP", "name": "Starsense Explorer Refractor Telescope",
     "description": "A smartphone-guided 70 mm refractor that tells you what to look at tonight.",
     "price_usd": 349.95, "categories": ["telescopes"], "picture": "StarsenseExplorer.jpg"},
    {"id": "1YMWWN1N4O", "name": "Eclipsmart Travel Refractor Telescope",
     "description": "A solar-safe travel telescope with a built-in filter, made for eclipse chasers.",
     "price_usd": 129.95, "categories": ["telescopes", "travel"], "picture": "EclipsmartTravelRefractorTelescope.jpg"},
    {"id": "L9ECAV7KIM", "name": "Lens Cleaning Kit",
     "description": "Brush, blower and microfibre cloths to keep optics free of dust and fingerprints.",
     "price_usd": 21.95, "categories": ["accessories"], "picture": "LensCleaningKit.jpg"},
    {"id": "2ZYFJ3GM2N", "name": "Roof Binoculars",
     "description": "10x42 roof-prism binoculars, waterproof and bright enough for the Milky Way.",
     "price_usd": 209.95, "categories": ["binoculars"], "picture": "RoofBinoculars.jpg"},
    {"id": "0PUK6V6EV0", "name": "Solar System Color Imager",
     "description": "A colour planetary camera for capturing Jupiter's bands and Saturn's rings.",
     "price_usd": 175.00, "categories": ["accessories", "telescopes"], "picture": "SolarSystemColorImager.jpg"},
    {"id": "LS4PSXUNUM", "name": "Red Flashlight",
     "description": "A red LED torch that keeps your eyes dark-adapted while reading star charts.",
     "price_usd": 57.08, "categories": ["accessories", "flashlights"], "picture": "RedFlashlight.jpg"},
    {"id": "9SIQT8TOJO", "name": "Optical Tube Assembly",
     "description": "An 8-inch Schmidt-Cassegrain optical tube for serious deep-sky observers.",
     "price_usd": 3599.00, "categories": ["accessories", "telescopes", "assembly"],
     "picture": "OpticalTubeAssembly.jpg"},
    {"id": "6E92ZMYYFZ", "name": "Solar Filter",
     "description": "A full-aperture white-light solar filter for safe sunspot and eclipse viewing.",
     "price_usd": 69.95, "categories": ["accessories", "telescopes"], "picture": "SolarFilter.jpg"},
    {"id": "HQTGWGPNH4", "name": "The Comet Book",
     "description": "A history of comets, from ancient omens to spacecraft rendezvous.",
     "price_usd": 0.99, "categories": ["books"], "picture": "TheCometBook.jpg"},
]

PRODUCT_IDS: list[str] = [p["id"] for p in PRODUCTS]

# Units of each currency per 1 USD (fixed, so conversions are reproducible).
RATES: dict[str, Decimal] = {
    "USD": Decimal("1"),
    "EUR": Decimal("0.92"),
    "GBP": Decimal("0.79"),
    "JPY": Decimal("149.50"),
    "CAD": Decimal("1.36"),
    "CHF": Decimal("0.88"),
    "AUD": Decimal("1.52"),
    "INR": Decimal("83.20"),
    "BRL": Decimal("4.97"),
    "SEK": Decimal("10.60"),
}

CENT = Decimal("0.01")


class UnknownCurrency(ValueError):
    pass


def convert(amount: Decimal | float | str, from_currency: str, to_currency: str) -> Decimal:
    """Convert through USD with the fixed table, rounded half-up to cents."""
    src, dst = from_currency.upper(), to_currency.upper()
    for code in (src, dst):
        if code not in RATES:
            raise UnknownCurrency(f"unsupported currency: {code}")
    value = Decimal(str(amount))
    if not value.is_finite():
        raise ValueError(f"invalid amount: {amount}")
    return (value / RATES[src] * RATES[dst]).quantize(CENT, rounding=ROUND_HALF_UP)


def luhn_valid(number: str) -> bool:
    """Luhn checksum of a card number (spaces and dashes allowed, 12-19 digits)."""
    digits = number.replace(" ", "").replace("-", "")
    if not re.fullmatch(r"[0-9]{12,19}", digits):
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0
