"""Example programs shipped with shardwise (package data)."""
