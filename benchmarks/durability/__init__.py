"""Durability: recovery from faults, history and thread growth, and the cost of ended runs."""
