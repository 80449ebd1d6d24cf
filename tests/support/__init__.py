"""Helpers the test modules share (processes, flows, servers)."""
