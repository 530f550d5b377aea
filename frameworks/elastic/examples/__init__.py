"""Runnable examples for the elastic framework."""
