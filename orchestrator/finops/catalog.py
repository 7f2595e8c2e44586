"""The fixed catalogue the generator draws from: providers, their services, regions and the applications."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Service:
    name: str
    category: str  # FOCUS ServiceCategory
    unit: str  # FOCUS PricingUnit
    price: float  # list unit price, USD
    qty: float  # median daily quantity of one resource
    resource_type: str
    commit: bool = False  # may be covered by a commitment discount


@dataclass(frozen=True)
class Provider:
    name: str  # FOCUS ProviderName
    code: str  # prefix of ids
    weight: float  # share of resources
    regions: tuple[str, ...]
    services: tuple[Service, ...]


PROVIDERS: tuple[Provider, ...] = (
    Provider("AWS", "aws", 0.45, ("us-east-1", "eu-west-1", "ap-southeast-2"), (
        Service("Amazon Elastic Compute Cloud", "Compute", "Hours", 0.192, 24.0, "Instance", True),
        Service("Amazon Simple Storage Service", "Storage", "GB-Month", 0.00077, 2500.0, "Bucket"),
        Service("Amazon Relational Database Service", "Databases", "Hours", 0.34, 24.0, "DBInstance", True),
        Service("Amazon CloudFront", "Networking", "GB", 0.085, 40.0, "Distribution"),
        Service("AWS Lambda", "Compute", "Requests", 0.0000002, 4_000_000.0, "Function"),
    )),
    Provider("Microsoft", "az", 0.30, ("eastus", "westeurope"), (
        Service("Virtual Machines", "Compute", "Hours", 0.166, 24.0, "VirtualMachine", True),
        Service("Storage Accounts", "Storage", "GB-Month", 0.0006, 3000.0, "StorageAccount"),
        Service("Azure SQL Database", "Databases", "Hours", 0.5, 24.0, "Database", True),
        Service("Bandwidth", "Networking", "GB", 0.087, 30.0, "PublicIP"),
    )),
    Provider("Google Cloud", "gcp", 0.25, ("us-central1", "europe-west4"), (
        Service("Compute Engine", "Compute", "Hours", 0.134, 24.0, "Instance", True),
        Service("Cloud Storage", "Storage", "GiB-Month", 0.00065, 2000.0, "Bucket"),
        Service("BigQuery", "Analytics", "TiB", 6.25, 0.6, "Dataset"),
        Service("Cloud SQL", "Databases", "Hours", 0.28, 24.0, "Instance", True),
    )),
)

APPLICATIONS: tuple[str, ...] = ("checkout", "catalog", "search", "payments", "analytics", "recommendations",
                                 "identity", "reporting", "notifications", "media")
TEAMS: dict[str, str] = {"checkout": "commerce", "catalog": "commerce", "search": "discovery",
                         "payments": "commerce", "analytics": "data", "recommendations": "discovery",
                         "identity": "platform", "reporting": "data", "notifications": "platform",
                         "media": "content"}
ACCOUNT_PURPOSES: tuple[str, ...] = ("prod", "staging", "data", "shared", "dev", "sandbox", "ml", "edge")

# Anomaly streams: the daily series anomalies are planted in (provider, service, pricing unit).
STREAMS: tuple[tuple[str, str, str], ...] = (
    ("AWS", "Amazon Elastic Compute Cloud", "Hours"),
    ("Microsoft", "Virtual Machines", "Hours"),
    ("Google Cloud", "Compute Engine", "Hours"),
)
