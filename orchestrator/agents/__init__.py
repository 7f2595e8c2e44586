"""Agents shipped with OpsBench."""
