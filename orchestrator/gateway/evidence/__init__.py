"""Where the gateway's tools read the world: one interface (`base.EvidenceSource`), a live and a frozen source."""

from .base import EvidenceSource, Mode
from .frozen import FrozenEvidence
from .live import LiveEvidence

__all__ = ["EvidenceSource", "FrozenEvidence", "LiveEvidence", "Mode"]
